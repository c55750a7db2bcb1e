"""Every program the ONNX export tests export imports back into gradgen and computes what gradgen computed from
the original (same feeds, same parameters, numpy engine), with every output under its own name: the one-op
program of every kernel case (every op type that has a one-op export), and the whole programs the export tests
build (the examples, each optimizer's training step, while and cond with their gradients, training batch norm,
learning-rate schedules, a custom gradient, one process of a data-parallel program, the metrics).

How close: integers and bools exactly, NaN and infinities at the same places, finite floats within
``ULPS`` machine epsilons of the output's largest magnitude, or of 1 when that is smaller. Not bitwise, because
the import does not give back the original ops: a composite op comes back as the ONNX primitives its export
wrote (softplus as Exp and Log, batch norm as reductions and arithmetic, a filter gradient as a Conv with the
roles swapped), which sum in another order and round at other steps. The inputs and parameters here are of
order 1, so a rounding is about an epsilon of 1 even where a result cancels to nearly 0 (the gradient of a conv
bias under batch norm is 0 exactly; both sides give +-5.6e-18 of float64 noise). Measured over every case
below: at most 1.8 epsilons of that scale (gelu_grad, float64); 1,310 of the 1,363 one-op cases and 420 of the
434 outputs of the whole programs are bitwise equal. A wrong formula is off by far more than 16.
"""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, data_parallel
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import Program
from tests.framework.op_harness import one_op_program
from tests.onnx.runtime import require
from tests.onnx.test_export_ops import CASES
from tests.onnx.test_export_programs import (OPTIMIZERS, _batch_norm_cnn, _loop_program, broadcast_gradient_program,
                                             optimizer_program, trained_example)
from tests.onnx.test_export_schedules_and_collectives import _scheduled_training, custom_gradient_program
from tests.onnx.test_round_trip_metrics import _feed as metrics_feed
from tests.onnx.test_round_trip_metrics import _program as metrics_program

ULPS = 16
"""Tolerance of a round trip: machine epsilons of the output's largest finite magnitude or 1 (see the module
doc)."""
UPDATED = "@NEW"


def assert_same(got, want, what: str) -> None:
    """Same dtype and shape; integers and bools equal; floats: NaN and infinities where they were, finite values
    within ``ULPS`` epsilons of the largest finite magnitude (or of 1)."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{what}: {got.dtype}{got.shape}, want " \
                                                              f"{want.dtype}{want.shape}"
    if want.dtype.kind != "f":
        return np.testing.assert_array_equal(got, want, err_msg=what)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)], err_msg=f"{what}: infinities")
    if finite.any():
        scale = float(np.max(np.abs(want[finite]), initial=0.0))
        tol = ULPS * float(np.finfo(want.dtype).eps) * max(scale, 1.0)
        np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=tol, err_msg=what)


def round_trip(program: Program, fetch: list[str], feed: dict, scope: Scope, *, single_process: bool = False,
               include_updates: bool = True, what: str = "") -> list[str]:
    """Export ``program`` with the values in ``scope``, import it, run both on ``feed``: the imported model's
    outputs are the fetched vars by their names, then ``<var>@NEW`` for every persistable the original updates,
    each equal to the original's value (``assert_same``). Returns the output names."""
    require("onnx")
    from gradgen.framework import export_onnx, import_onnx

    params = {k: np.array(scope[k]) for k in scope}
    model = export_onnx(program, params=params, fetch_list=fetch, single_process=single_process,
                        include_updates=include_updates)
    imported, values, outputs = import_onnx(model)
    names = list(outputs)
    assert names[:len(fetch)] == fetch and all(n.endswith(UPDATED) for n in names[len(fetch):]), names
    for name, var in outputs.items():  # each output under its own name in the imported program
        assert var == name and imported.global_block().has_var(var), f"{what}: output {name!r} is var {var!r}"
    with np.errstate(all="ignore"):
        reference = Executor(backend="numpy")
        want = reference.run(program, feed=feed, fetch_list=fetch, scope=scope)  # updates scope's persistables
        back = Scope()
        for name, value in values.items():
            back.set(name, value)
        got = reference.run(imported, feed=feed, fetch_list=names, scope=back)
    for name, g, w in zip(names, got, want + [scope[n[:-len(UPDATED)]] for n in names[len(fetch):]]):
        assert_same(g, w, f"{what}: {name}")
    return names


def _ran(startup: Program) -> Scope:
    scope = Scope()
    Executor().run(startup, scope=scope)
    return scope


def test_every_one_op_case_round_trips():
    """All the kernel cases' one-op programs (over a thousand, a few seconds in all): one test, so that a
    failure names its case and the suite stays short."""
    failures = []
    for case in CASES:
        main, op, feed = one_op_program(case)
        fetch = [n for names in op.outputs.values() for n in names]
        try:
            round_trip(main, fetch, feed, Scope(), include_updates=False, what=case.id)
        except Exception as e:  # noqa: BLE001 - collected, every failing case is listed
            failures.append(f"{case.id}: {type(e).__name__}: {str(e).splitlines()[0]}")
    assert not failures, f"{len(failures)} of {len(CASES)} cases do not round-trip:\n" + "\n".join(failures)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_traced_formulas_round_trip_on_special_values(dtype):
    """The ops whose export is their formula traced into ONNX nodes (``lower_derived``), on every pair of special
    values (infinities, NaN, signed zeros, huge values): the import of those nodes computes what the op does."""
    from tests.onnx.test_export_derived import _traced_ops, special_cases

    checked = 0
    for case in (c for op_type in _traced_ops() for c in special_cases(op_type, dtype)):
        main, op, feed = one_op_program(case)
        round_trip(main, [n for names in op.outputs.values() for n in names], feed, Scope(), include_updates=False,
                   what=f"{case.op} {dtype}")
        checked += 1
    assert checked >= 10


NONFINITE_EXPORT_DIFFERS: dict[str, str] = {}
"""Op types whose export puts NaN in other places than gradgen's kernel on inputs with infinities or NaN, with
why: none today. prod_others multiplies in the kernels' order, max pooling and its gradient pick the first NaN
without ArgMax and multiply by the 0/1 mask, and the convolutions' adjoints have no padding products
(``numerics.md``, rule 5), in ONNX Runtime as in the re-import (``onnx.md``)."""


def _with_special_values(case, rng):
    """``case`` with a third of each float input's elements replaced by infinities, NaN, signed zeros, huge values."""
    from tests.framework.op_harness import Case

    specials = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e30, -1e30, 80.0, -80.0, 750.0])

    def spoil(a):
        a = np.array(a)
        if a.dtype.kind != "f" or a.size == 0:
            return a
        flat = a.reshape(-1)
        at = rng.choice(flat.size, size=max(1, flat.size // 3), replace=False)
        flat[at] = rng.choice(specials, size=at.size)
        return a

    inputs = {k: [spoil(x) for x in v] if isinstance(v, list) else spoil(v) for k, v in case.inputs.items()}
    return Case(case.op, inputs, None, case.attrs, case.n_outputs, case.label)


def test_every_one_op_case_with_special_values_round_trips_but_the_known_exports():
    rng = np.random.default_rng(0)
    differs, ran = {}, 0
    for case in CASES:
        main, op, feed = one_op_program(_with_special_values(case, rng))
        fetch = [n for names in op.outputs.values() for n in names]
        try:
            with np.errstate(all="ignore"):
                Executor(backend="numpy").run(main, feed=feed, fetch_list=fetch, scope=Scope())
        except Exception:  # noqa: BLE001 - an op that refuses such inputs (an index out of range) has no result
            continue
        ran += 1
        try:
            round_trip(main, fetch, feed, Scope(), include_updates=False, what=case.id)
        except AssertionError as e:
            differs.setdefault(case.op, str(e).splitlines()[0])
    assert ran > 1300
    assert set(differs) <= set(NONFINITE_EXPORT_DIFFERS), {k: v for k, v in differs.items()
                                                           if k not in NONFINITE_EXPORT_DIFFERS}


def test_the_one_op_cases_cover_every_exportable_op_type():
    require("onnx")
    from gradgen.framework.tools.onnx.export import LOWERINGS
    from tests.onnx.test_export_ops import PROGRAM_TESTED

    covered = {c.op for c in CASES} | PROGRAM_TESTED
    assert set(LOWERINGS) <= covered
    whole_programs = {"cond", "while", "call", "custom_gradient", "allreduce_start", "allreduce_wait"}
    assert set(LOWERINGS) - {c.op for c in CASES} <= whole_programs  # round-tripped by the programs below


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_each_example_round_trips(name, train):
    ex, scope = trained_example(name, train)
    round_trip(ex.main, [ex.loss.name], ex.feed, scope, what=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_each_optimizers_training_step_round_trips(name, dtype):
    main, startup, loss, feed = optimizer_program(name, dtype)
    scope = _ran(startup)
    Executor().run(main, feed=feed, scope=scope)  # states away from their initial values
    names = round_trip(main, [loss.name], feed, scope, what=name)
    assert {p.name + UPDATED for p in main.global_block().all_parameters()} <= set(names)


@pytest.mark.parametrize("steps", [0, 3])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_while_and_cond_and_their_gradients_round_trip(steps, sign):
    main, fetch = _loop_program()
    rng = np.random.default_rng(steps)
    feed = {"n": np.array(steps, np.int64), "h0": sign * np.abs(rng.standard_normal((2, 3))),
            "w": np.abs(rng.standard_normal((3, 3))) * 0.5}
    round_trip(main, [v.name for v in fetch], feed, Scope(), what="while/cond")


@pytest.mark.parametrize("batch", [1, 6])
def test_training_and_pruned_batch_norm_round_trip(batch):
    from gradgen.framework.passes.prune import prune

    main, startup, logits = _batch_norm_cnn()
    rng = np.random.default_rng(batch)
    feed = {"image": rng.standard_normal((batch, 1, 4, 4)), "label": rng.integers(0, 2, (batch, 1))}
    if batch > 1:  # batch norm of one value per channel is refused at run time
        names = round_trip(main, ["loss"], feed, _ran(startup), what="training batch norm")
        assert {"bn.mean@NEW", "bn.variance@NEW"} <= set(names)
    infer = prune(main, [logits.name], ["image"], for_test=True)
    round_trip(infer, [logits.name], {"image": feed["image"]}, _ran(startup), what="inference batch norm")


@pytest.mark.parametrize("axis, x_shape, index", [(0, [-1, 5], [0, 2, -1, 2]), (1, [-1, 5], [[0, -1], [2, 2], [4, 0]]),
                                                  (0, [-1, 3], 1), (1, [2, -1, 3], [[0, 1], [1, 1]])])
def test_a_gather_gradient_over_run_time_dims_with_an_infinity_stays_in_its_rows(axis, x_shape, index):
    """gather_grad exports as a scatter-add (ONNX Runtime equal to gradgen, bit for bit: an infinite gradient
    reaches only the rows it was gathered from; a one-hot matmul made every other row NaN) and comes back."""
    from gradgen.framework import export_onnx, gradients
    from gradgen.program import layers, program_guard
    from tests.onnx.runtime import run_ort

    index = np.array(index, np.int64)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", x_shape, "float64")
        at = layers.data("at", [-1] * (index.ndim - 1) + list(index.shape[-1:]), "int64")
        (dx,) = gradients(layers.reduce_sum(layers.square(layers.gather(x, at, axis=axis))), [x])
    xs = np.random.default_rng(0).standard_normal([4 if d < 0 else d for d in x_shape])
    xs[tuple(int(index.reshape(-1)[0]) if a == axis else 0 for a in range(xs.ndim))] = np.inf  # a gathered one
    feed = {"x": xs, "at": index}
    (want,) = Executor(backend="numpy").run(main, feed=feed, fetch_list=[dx], scope=Scope())
    assert np.isinf(want).any() and not np.isnan(want).any()
    np.testing.assert_array_equal(run_ort(export_onnx(main, fetch_list=[dx]), feed)[dx.name], want)
    round_trip(main, [dx.name], feed, Scope(), what="gather_grad")


def test_a_gradient_over_broadcast_dims_round_trips():
    main, fetch = broadcast_gradient_program()
    rng = np.random.default_rng(2)
    feed = {"x": rng.standard_normal((4, 3)), "y": rng.standard_normal((1, 3))}
    round_trip(main, [v.name for v in fetch], feed, Scope(), what="reduce_as")


@pytest.mark.parametrize("schedule", ["piecewise", "exponential", "cosine", "warmup"])
def test_scheduled_training_round_trips_step_after_step(schedule):
    main, startup, loss, lr = _scheduled_training(schedule)
    scope = _ran(startup)
    rng = np.random.default_rng(3)
    for step in range(5):  # the schedule's counter moves on; staircases and epochs turn over
        feed = {"x": rng.standard_normal((4, 3)), "y": rng.standard_normal((4, 1))}
        round_trip(main, [loss.name, lr.name], feed, scope, what=f"{schedule} step {step}")


def test_a_custom_gradient_round_trips():
    main, y, dx = custom_gradient_program()
    feed = {"x": np.random.default_rng(5).standard_normal((2, 3))}
    round_trip(main, [y.name, dx.name], feed, Scope(), what="custom_gradient")


def test_one_process_of_a_data_parallel_program_round_trips():
    from gradgen.framework.runtime import communicator as comm_module
    from gradgen.framework.runtime.communicator import Solo, init_parallel

    main, startup, loss, _ = _scheduled_training("cosine")
    data_parallel(main, startup, bucket_bytes=8)
    init_parallel(Solo())
    try:
        feed = {"x": np.random.default_rng(8).standard_normal((5, 3)), "y": np.ones((5, 1))}
        round_trip(main, [loss.name], feed, _ran(startup), single_process=True, what="data parallel")
    finally:
        comm_module._current.clear()


@pytest.mark.parametrize("rows", [9, 0])
def test_the_metrics_round_trip(rows):
    main, startup, outs, stats = metrics_program("float64", "int32")
    scope = _ran(startup)
    Executor().run(main, feed=metrics_feed(12, "float64", "int32", 1), fetch_list=outs, scope=scope)
    # the auc counters come out as <var>@NEW: ONNX names a value once, and the counter's own name is its initializer
    names = round_trip(main, [v.name for v in outs], metrics_feed(rows, "float64", "int32", 2), scope, what="metrics")
    assert {s.name + UPDATED for s in stats} <= set(names)


def test_the_results_of_a_named_cond_keep_their_names():
    from gradgen.program import layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        big = layers.greater_than(layers.reduce_sum(x), layers.fill_constant([], "float64", 0.0))
        loss = layers.cond(big, lambda: layers.reduce_sum(x), lambda: layers.reduce_mean(x), name="loss")
        pair = layers.cond(big, lambda: [layers.exp(x), layers.tanh(x)], lambda: [x, layers.square(x)], name="pair")
    for sign in (1.0, -1.0):
        feed = {"x": sign * np.abs(np.random.default_rng(4).standard_normal((2, 3)))}
        names = round_trip(main, ["loss", *(v.name for v in pair)], feed, Scope(), what="named cond")
        assert names == ["loss", "pair.0", "pair.1"] and loss.name == "loss"
