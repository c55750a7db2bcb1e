"""Programs with the ops that carry training state or talk to other processes: a training program with a
learning-rate schedule runs step after step in ONNX Runtime (its counter is a persistable that comes out as
``@NEW``), a custom gradient exports its bodies, and a data-parallel program is refused in the one error."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, data_parallel, gradients, optimizer
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import assert_close, require, run_ort

STEPS = 6


def _export():
    require("onnx")
    from gradgen.framework import export_onnx

    return export_onnx


def _scheduled_training(schedule: str):
    """A small regression trained by SGD whose rate comes from ``schedule``; (main, startup, loss, lr)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.data("y", [-1, 1], "float64")
        w = layers.create_parameter([3, 1], "float64", name="w")
        loss = layers.reduce_mean(layers.square(layers.matmul(x, w) - y))
        if schedule == "piecewise":
            lr = layers.piecewise_decay([2, 4], [0.1, 0.05, 0.01], dtype="float64")
        elif schedule == "exponential":
            lr = layers.exponential_decay(0.1, 2, 0.5, staircase=True, dtype="float64")
        elif schedule == "cosine":
            lr = layers.cosine_decay(0.1, 2, 3, dtype="float64")
        else:
            lr = layers.linear_lr_warmup(layers.exponential_decay(0.1, 3, 0.9, dtype="float64"), 3, 0.0, 0.1,
                                         dtype="float64")
        optimizer.SGD(learning_rate=lr).minimize(loss)
    return main, startup, loss, lr


@pytest.mark.parametrize("schedule", ["piecewise", "exponential", "cosine", "warmup"])
def test_a_scheduled_training_program_runs_step_after_step_in_onnx_runtime(schedule):
    export_onnx = _export()
    main, startup, loss, lr = _scheduled_training(schedule)
    scope = Scope()
    Executor().run(startup, scope=scope)
    model = export_onnx(main, fetch_list=[loss, lr])  # no params: the persistables are graph inputs, fed per step
    outputs = {o.name for o in model.graph.output}
    assert {"@LR_DECAY_COUNTER@@NEW", "w@NEW"} <= outputs
    state = {name: np.array(scope[name]) for name in ("w", "@LR_DECAY_COUNTER@")}
    rng = np.random.default_rng(3)
    rates = []
    for step in range(STEPS):
        feed = {"x": rng.standard_normal((4, 3)), "y": rng.standard_normal((4, 1))}
        got = run_ort(model, {**feed, **state})
        want_loss, want_lr = Executor().run(main, feed=feed, fetch_list=[loss, lr], scope=scope)
        assert_close(got[loss.name], want_loss, f"loss at step {step}")
        assert_close(got[lr.name], want_lr, f"learning rate at step {step}")
        for name in state:
            assert_close(got[name + "@NEW"], scope[name], f"{name} after step {step}")
            state[name] = got[name + "@NEW"]
        rates.append(float(want_lr))
    assert int(state["@LR_DECAY_COUNTER@"]) == STEPS - 1  # the counter starts at -1 and counts every step
    assert len(set(rates)) > 1  # the schedule changed the rate within these steps


def test_a_data_parallel_program_is_refused_with_every_collective_op_listed():
    export_onnx = _export()
    from gradgen.framework.tools.onnx import OnnxExportError

    main, startup, loss, _ = _scheduled_training("piecewise")
    data_parallel(main, startup)
    collectives = [(i, op.type) for i, op in enumerate(main.global_block().ops) if op.type.startswith("allreduce")]
    assert len(collectives) >= 2
    with pytest.raises(OnnxExportError) as info:
        export_onnx(main, fetch_list=[loss])
    message = str(info.value)
    assert f"{len(collectives)} op(s) cannot be exported" in message
    for i, op_type in collectives:
        assert f"block 0, op #{i} ({op_type}): exchanges values between the processes of an MPI job" in message
    with pytest.raises(OnnxExportError, match=r"op #\d+ \(broadcast\): exchanges values"):
        export_onnx(startup)


def custom_gradient_program():
    """tanh(x) * 2 with a user's gradient rule (clip the incoming gradient); (main, y, dx)."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        clipped = layers.custom_gradient(lambda v: layers.tanh(v) * 2.0,
                                         lambda ins, outs, douts: [layers.clip(douts[0], -0.5, 0.5)],
                                         name="clip_rule")
        y = clipped(x)
        loss = layers.reduce_sum(layers.square(y))
        (dx,) = gradients(loss, [x])
    return main, y, dx


def test_a_custom_gradient_exports_its_forward_body_and_its_gradient_rule():
    export_onnx = _export()
    main, y, dx = custom_gradient_program()
    assert "custom_gradient" in {op.type for op in main.global_block().ops}
    assert "call" in {op.type for op in main.global_block().ops}
    feed = {"x": np.random.default_rng(5).standard_normal((2, 3))}
    want = Executor().run(main, feed=feed, fetch_list=[y, dx], scope=Scope())
    got = run_ort(export_onnx(main, fetch_list=[y, dx]), feed)
    assert_close(got[y.name], want[0], "y")
    assert_close(got[dx.name], want[1], "dx")
    assert np.max(np.abs(want[1])) <= 0.5  # the user's rule, not tanh's derivative, made the gradient


def test_single_process_exports_a_data_parallel_program_as_one_process_runs_it():
    export_onnx = _export()
    from gradgen.framework.runtime import communicator as comm_module
    from gradgen.framework.runtime.communicator import Solo, init_parallel

    main, startup, loss, lr = _scheduled_training("cosine")
    buckets = data_parallel(main, startup, bucket_bytes=8)  # a bucket per gradient: several start/wait pairs
    assert len(buckets) >= 1
    init_parallel(Solo())  # the executor's reference: a world of one
    try:
        scope = Scope()
        Executor().run(startup, scope=scope)
        model = export_onnx(main, fetch_list=[loss], single_process=True)
        assert {"Concat", "Slice"} <= {n.op_type for n in model.graph.node}
        feed = {"x": np.random.default_rng(8).standard_normal((5, 3)), "y": np.ones((5, 1))}
        state = {name: np.array(scope[name]) for name in ("w", "@LR_DECAY_COUNTER@")}
        got = run_ort(model, {**feed, **state})
        (want,) = Executor().run(main, feed=feed, fetch_list=[loss], scope=scope)
        assert_close(got[loss.name], want, "loss")
        assert_close(got["w@NEW"], scope["w"], "w after the step")
        assert "broadcast" in {op.type for op in startup.global_block().ops}
        started = run_ort(export_onnx(startup, single_process=True), {})
        fresh = Scope()
        Executor().run(startup, scope=fresh)
        assert {"w@NEW", "@LR_DECAY_COUNTER@@NEW"} <= set(started)
        for name, value in started.items():  # rank 0's initial values, which a world of one keeps
            assert_close(value, fresh[name[:-4]], name)
    finally:
        comm_module._current.clear()


def test_the_cli_exports_a_data_parallel_program_only_with_single_process(tmp_path, capsys):
    export_onnx = _export()
    import onnx

    from gradgen.framework.tools.cli import main as cli

    main, startup, loss, lr = _scheduled_training("cosine")
    data_parallel(main, startup, bucket_bytes=8)
    main.save(tmp_path / "main.json")
    out = tmp_path / "model.onnx"
    args = ["export-onnx", str(tmp_path / "main.json"), "--fetch", loss.name, "-o", str(out)]
    assert cli(args) != 0
    assert "allreduce" in capsys.readouterr().err and not out.exists()
    assert cli(args + ["--single-process"]) == 0
    exported = onnx.load(str(out))
    assert {n.op_type for n in exported.graph.node} == {n.op_type for n in export_onnx(
        main, fetch_list=[loss], single_process=True).graph.node}
