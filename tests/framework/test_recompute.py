"""Recompute (gradient checkpointing): same gradients, the copies where they belong, less memory, clear errors."""
import gc
import tracemalloc

import numpy as np
import pytest

from gradgen.framework import BackwardError, Executor, Scope, append_backward, gradients
from gradgen.framework.tools.memory import analyze_memory
from gradgen.framework.passes.recompute import RECOMPUTE_SUFFIX, evenly_spaced_checkpoints, outputs_of_type
from gradgen.program import Program, layers, program_guard, verify

WIDTH, BATCH = 16, 8


def _chain(depth, checkpoints=None, dropout=False, skip=False, batch_norm=False, parameter_list=None,
           width=WIDTH, dtype="float64"):
    """An fc+relu chain; ``checkpoints(block)`` picks the checkpoints once the forward part is built."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, width], dtype)
        h = x
        first = None
        for i in range(depth):
            h = layers.relu(h @ layers.create_parameter([width, width], dtype, name=f"w{i}"))
            if dropout:
                h = layers.dropout(h, p=0.3)
            if batch_norm and i == 1:
                h = layers.batch_norm(h)
            if skip and first is not None and i in (4, 7):
                h = h + first  # the first activation is read again in two later segments
            first = h if first is None else first
        loss = layers.mean(layers.square(h))
        block = main.global_block()
        chosen = checkpoints(block) if checkpoints is not None else None
        params_grads = append_backward(loss, parameter_list=parameter_list, checkpoints=chosen)
    return main, startup, loss, params_grads


def _every_third(block):
    return outputs_of_type(block, "relu")[2::3]


def _run(main, startup, loss, params_grads, steps=1):
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.default_rng(0).standard_normal((BATCH, WIDTH))}
    for _ in range(steps):
        out = exe.run(main, feed=feed, fetch_list=[loss] + [g for _, g in params_grads], scope=scope)
    return out, scope


def _assert_same_gradients(**kw):
    plain = _chain(**{k: v for k, v in kw.items() if k != "checkpoints"})
    checked = _chain(**kw)
    assert [(p.name, g.name) for p, g in plain[3]] == [(p.name, g.name) for p, g in checked[3]]
    a, _ = _run(*plain)
    b, _ = _run(*checked)
    assert len(a) == len(b) > 1
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    verify(checked[0])
    return checked[0]


def _recomputed(main):
    return [op for op in main.global_block().ops if any(n.endswith(RECOMPUTE_SUFFIX) for n in op.output_arg_names)]


def test_mlp_chain_gradients_are_identical():
    main = _assert_same_gradients(depth=9, checkpoints=_every_third)
    assert len(_recomputed(main)) > 0


def test_dropout_is_kept_not_rerun_and_gradients_are_identical():
    main = _assert_same_gradients(depth=9, checkpoints=_every_third, dropout=True)
    assert {op.type for op in _recomputed(main)} == {"matmul", "relu"}


def test_a_var_read_by_two_later_segments_is_kept():
    main = _assert_same_gradients(depth=9, checkpoints=_every_third, skip=True)
    first = outputs_of_type(main.global_block(), "relu")[0].name
    assert first + RECOMPUTE_SUFFIX not in main.global_block().vars
    readers = [op for op in main.global_block().ops if op.role == "backward" and first in op.input_arg_names]
    assert readers  # the grad ops still read the kept original


def test_parameter_list_gradients_are_identical():
    main = _assert_same_gradients(depth=8, checkpoints=_every_third, parameter_list=["w1", "w5"])
    assert len(_recomputed(main)) > 0


def test_batch_norm_updates_its_running_stats_once():
    plain = _chain(depth=6, batch_norm=True)
    checked = _chain(depth=6, batch_norm=True, checkpoints=_every_third)
    assert not [op for op in _recomputed(checked[0]) if op.type == "batch_norm"]
    (a, sa), (b, sb) = _run(*plain, steps=2), _run(*checked, steps=2)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    mean = next(n for n in checked[0].global_block().vars if n.endswith(".mean"))
    assert np.array_equal(sa[mean], sb[mean])


def test_gradients_accepts_checkpoints_too():
    def build(checkpoints):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [-1, WIDTH], "float64")
            x.stop_gradient = False
            h = x
            for i in range(6):
                h = layers.tanh(h @ layers.create_parameter([WIDTH, WIDTH], "float64", name=f"w{i}"))
            picked = evenly_spaced_checkpoints(outputs_of_type(main.global_block(), "tanh")) if checkpoints else None
            (gx,) = gradients([layers.reduce_sum(h)], [x], checkpoints=picked)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        feed = {"x": np.random.default_rng(1).standard_normal((BATCH, WIDTH))}
        return main, exe.run(main, feed=feed, fetch_list=[gx], scope=scope)[0]

    main, with_ = build(True)
    _, without = build(False)
    assert np.array_equal(with_, without) and len(_recomputed(main)) > 0


def test_recomputed_ops_are_backward_copies_placed_before_their_first_reader():
    main, _, _, _ = _chain(depth=6, checkpoints=lambda b: ["relu_1", "relu_3"])
    ops = main.global_block().ops
    forward_end = next(i for i, op in enumerate(ops) if op.role == "backward")
    copies = _recomputed(main)
    # Segment (relu_1, relu_3] gives matmul_2, relu_2; segment [x, relu_1] gives matmul_0, relu_0; the last
    # segment (after relu_3) is still alive when its grad ops run and is not copied.
    assert [op.output_arg_names for op in copies] == [["matmul_2@RECOMPUTE"], ["relu_2@RECOMPUTE"],
                                                      ["matmul_0@RECOMPUTE"], ["relu_0@RECOMPUTE"]]
    for op in copies:
        assert op.role == "backward"
        assert op.forward_op.type == op.type and op.forward_op.role == "forward"
        assert ops.index(op.forward_op) < forward_end
    assert copies[0].input_arg_names == ["relu_1", "w2"]
    assert copies[1].input_arg_names == ["matmul_2@RECOMPUTE"]
    for first, last in ((copies[0], copies[1]), (copies[2], copies[3])):
        at, end = ops.index(first), ops.index(last) + 1
        readers = [i for i, op in enumerate(ops) if i >= forward_end and op not in copies
                   and last.output_arg_names[0] in op.input_arg_names]
        assert end == min(readers)  # the copies sit right before the first grad op reading them
        assert all(ops[i].role == "backward" for i in range(forward_end, at))
    # After the forward part, no op reads an original that was recomputed.
    for op in ops[forward_end:]:
        assert not {"relu_0", "relu_2", "matmul_0", "matmul_2"} & set(op.input_arg_names)


def test_deep_chain_has_a_lower_memory_peak():
    def peak(checkpoints):
        main, _, loss, _ = _chain(depth=36, width=256, dtype="float32",
                                  checkpoints=(lambda b: evenly_spaced_checkpoints(outputs_of_type(b, "relu")))
                                  if checkpoints else None)
        return analyze_memory(main, {"x": (128, 256)}, [loss]).peak_bytes

    with_, without = peak(True), peak(False)
    assert with_ < 0.5 * without, (with_, without)


def test_deep_chain_allocates_less_when_run():
    def measured(checkpoints):
        main, startup, loss, params_grads = _chain(
            depth=36, width=256, dtype="float32",
            checkpoints=(lambda b: evenly_spaced_checkpoints(outputs_of_type(b, "relu"))) if checkpoints else None)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        feed = {"x": np.ones((128, 256), "float32")}
        # The first run: it allocates the plan's buffers, whose number the schedule's lifetimes decide
        # (later runs reuse them and allocate almost nothing, with or without checkpoints).
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        exe.run(main, feed=feed, fetch_list=[loss, params_grads[0][1]], scope=scope)  # the whole backward runs
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        return peak

    assert measured(True) < 0.6 * measured(False)


@pytest.mark.parametrize("bad, message", [
    ("nope", "checkpoint 'nope' names no var of block 0"),
    ("unused", "checkpoint 'unused' is not read or written by any op of the forward part"),
    (3, "a checkpoint must be a Variable or a var name, got int 3"),
])
def test_bad_checkpoints_raise_before_anything_is_appended(bad, message):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float64")
        main.global_block().create_var("unused", [4], "float64")
        loss = layers.mean(layers.relu(x @ layers.create_parameter([4, 4], "float64", name="w")))
        count = len(main.global_block().ops)
        with pytest.raises(BackwardError, match=message):
            append_backward(loss, checkpoints=["relu_0", bad])
    assert len(main.global_block().ops) == count


def test_a_checkpoint_of_another_program_raises():
    other = Program()
    with program_guard(other, Program()):
        stranger = layers.relu(layers.data("x", [-1, 4], "float64"))
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        loss = layers.mean(layers.relu(x @ layers.create_parameter([4, 4], "float64", name="w")))
        with pytest.raises(BackwardError, match="'relu_0' is a var of another program"):
            append_backward(loss, checkpoints=[stranger])


@pytest.mark.parametrize("picked", [[], ["x", "w0"]])
def test_no_or_input_checkpoints_recompute_nothing(picked):
    main = _assert_same_gradients(depth=4, checkpoints=lambda b: picked)
    assert _recomputed(main) == []


def test_evenly_spaced_checkpoints():
    names = [f"h{i}" for i in range(1, 51)]
    picked = evenly_spaced_checkpoints(names)
    assert picked == ["h7", "h13", "h19", "h25", "h32", "h38", "h44"]  # round(sqrt(50)) = 7, runs of 6 or 7
    assert evenly_spaced_checkpoints(names[:9]) == ["h3", "h5", "h7"]
    assert evenly_spaced_checkpoints(names[:5], count=5) == names[:5]
    assert evenly_spaced_checkpoints(names[:5], count=0) == []
    assert evenly_spaced_checkpoints([]) == []
    with pytest.raises(BackwardError, match="cannot pick 6 checkpoints from 5 candidates"):
        evenly_spaced_checkpoints(names[:5], count=6)


def test_bench_rows_run_on_a_small_chain():
    from tests.bench.recompute_case import recompute_rows

    rows = recompute_rows(1, layers_count=9, width=32, batch=16)
    assert [r["case"] for r in rows] == ["recompute (3 ckpts): step time"] + [
        f"recompute (3 ckpts): {part} peak, {how}" for part in ("fwd+bwd", "whole step")
        for how in ("analysis", "tracemalloc")]
    assert rows[1]["with"] < rows[1]["without"]  # the predicted fwd+bwd peak


def test_second_order_through_recomputed_copies_agrees_to_rounding():
    def build(checkpointed):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [-1, 8], "float64")
            x.stop_gradient = False
            h = x
            for i in range(9):
                h = layers.tanh(h @ layers.create_parameter([8, 8], "float64", name=f"w{i}"))
            picked = evenly_spaced_checkpoints(outputs_of_type(main.global_block(), "tanh")) if checkpointed else None
            (gx,) = gradients([layers.reduce_sum(h)], [x], checkpoints=picked)
            (ggx,) = gradients([layers.reduce_sum(gx * gx)], [x], checkpoints=picked)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        feed = {"x": np.random.default_rng(1).standard_normal((4, 8))}
        return exe.run(main, feed=feed, fetch_list=[gx, ggx], scope=scope)

    (g1, gg1), (g2, gg2) = build(True), build(False)
    assert np.array_equal(g1, g2)
    # The second pass sees the copies as more paths, so it sums the same terms in another order.
    np.testing.assert_allclose(gg1, gg2, rtol=1e-12, atol=1e-12)


def test_an_op_with_a_checkpoint_output_and_a_recomputed_one():
    # softmax_with_cross_entropy makes Softmax (read by its own grad op: recomputed) and Loss (the checkpoint,
    # read by mean's grad op before the copy exists): that read must stay on the original.
    def build(checkpointed):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [-1, WIDTH], "float64")
            label = layers.data("label", [-1, 1], "int64")
            logits = layers.tanh(x @ layers.create_parameter([WIDTH, 5], "float64", name="w"))
            loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
            picked = [main.global_block().ops[-2].output("Loss")[0]] if checkpointed else None
            ((_, grad),) = append_backward(loss, checkpoints=picked)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        rng = np.random.default_rng(2)
        feed = {"x": rng.standard_normal((BATCH, WIDTH)), "label": rng.integers(0, 5, (BATCH, 1))}
        return main, exe.run(main, feed=feed, fetch_list=[grad], scope=scope)[0]

    main, with_ = build(True)
    _, without = build(False)
    assert np.array_equal(with_, without)
    assert "softmax_with_cross_entropy" in {op.type for op in _recomputed(main)}
    mean_grad = next(op for op in main.global_block().ops if op.type == "reduce_mean_grad")
    assert not any(n.endswith(RECOMPUTE_SUFFIX) for n in mean_grad.input_arg_names)
