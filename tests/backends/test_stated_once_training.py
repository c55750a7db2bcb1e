"""The gradient norms, the learning-rate schedules and the metrics stated once (``program/ops/optimizer.py``,
``lr_schedule.py``, ``metrics.py``): global_norm, clip_by_global_norm, piecewise_decay, exponential_decay,
cosine_decay, linear_lr_warmup, accuracy, precision_recall and auc, each one ``compute`` over ``xp`` that every
engine derives its kernel from. On the edges of each op's domain (float16, float32 and float64, mixed dtypes, NaN
and infinities, zero-size and size-1 dims, a norm of 0 and one exactly at max_norm, a step exactly at a boundary,
at the end of the warmup and of an epoch, ties and NaN among scores, k up to the class count, scores outside [0, 1]
and on a bucket's edge, counts carried from earlier runs) every engine gives the numpy engine's answer bit for bit,
or to rounding where it sums or takes pow and cos its own way (``ROUNDED``); a label outside the classes and a NaN
score are refused on every engine with numpy's words; ONNX Runtime runs the export to the executor's answer, bit
for bit as well (float64 to float16 rounded once, ``lower_math.rounded_once``)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, export_onnx
from gradgen.program import Program, layers, program_guard
from tests.backends.test_stated_once import assert_identical, run_case, with_fetch
from tests.framework.op_harness import Case
from tests.onnx.runtime import assert_close, require, run_ort

rng = np.random.default_rng(41)
FLOATS = ("float16", "float32", "float64")
NAN, INF = float("nan"), float("inf")
HALF_TIE = 1 + 2 ** -11 + 2 ** -40
"""A float64 that rounds up to float16 once, but to 1.0 through float32 (a tie there): the rounding stated once."""


def _x(shape, dtype: str, scale: float = 3.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def norm_cases():
    for dtype in FLOATS:
        xs = [_x((3, 4), dtype), _x((5,), dtype)]
        yield Case("global_norm", {"X": xs}, None, label=dtype)
        yield Case("clip_by_global_norm", {"X": xs}, None, {"max_norm": 1.0}, {"Out": 2}, label=dtype)
    yield Case("clip_by_global_norm", {"X": [_x((3,), "float32")]}, None, {"max_norm": 1e4}, label="below")
    mixed = [np.array([1.0, -1.5], np.float16), np.array([[3e5]]), np.float32(2.0)]  # past float16's top
    special = [np.array([NAN, 1.0], np.float32), np.array([INF, 0.5], np.float32)]
    for label, xs in [("mixed", mixed), ("mixed, float32 first", mixed[::-1]), ("nan", special),
                      ("inf", special[1:]), ("-inf", [-special[1]]), ("zeros", [np.zeros(3, np.float32)]),
                      ("empty", [np.zeros((0, 3), np.float32), np.ones(2, np.float32)]),
                      ("empty only", [np.zeros(0, np.float64)]), ("at max_norm", [np.array([3.0, -4.0])]),
                      ("float16 squares past 65504", [np.array([300.0, -300.0], np.float16)]),
                      ("-0", [np.array([-0.0, 0.0], np.float32)])]:
        yield Case("global_norm", {"X": xs}, None, label=label)
        yield Case("clip_by_global_norm", {"X": xs}, None, {"max_norm": 5.0}, {"Out": len(xs)}, label=label)
    yield Case("clip_by_global_norm", {"X": [np.zeros(2)]}, None, {"max_norm": 0.0}, label="0 / 0")
    yield Case("clip_by_global_norm", {"X": [np.array([HALF_TIE, -HALF_TIE], np.float64), np.float16(1.0)]}, None,
               {"max_norm": 1.0}, {"Out": 2}, label="float16 rounded once")


def _step(value: int, dtype: str, shape=()) -> np.ndarray:
    return np.full(shape, value, dtype)


def schedule_cases():
    values = [0.1, 0.01, HALF_TIE]
    for dtype, steps in (("int32", (-5, 9, 10, 20)), ("int64", (0, 19, 2 ** 40))):
        for s in steps:  # the boundaries: values[1] from step 10 on, values[2] from 20
            yield Case("piecewise_decay", {"Step": _step(s, dtype, (1,))}, None,
                       {"boundaries": [10, 20], "values": values, "dtype": "float16"}, label=f"{s}")
    for out in FLOATS:
        yield Case("piecewise_decay", {"Step": _step(20, "int64")}, None,
                   {"boundaries": [10, 20], "values": values, "dtype": out}, label=out)
        yield Case("piecewise_decay", {"Step": _step(3, "int32")}, None, {"boundaries": [], "values": [HALF_TIE],
                                                                          "dtype": out}, label=f"{out},one value")
    decay = {"learning_rate": 0.1, "decay_steps": 10, "decay_rate": 0.5}
    for staircase in (False, True):
        for s, out in ((9, "float32"), (10, "float32"), (11, "float32"), (35, "float64")):  # beside a stair
            yield Case("exponential_decay", {"Step": _step(s, "int64")}, None,
                       {**decay, "staircase": staircase, "dtype": out}, label=f"{s},{staircase},{out}")
    for step_dtype, s, rate, out in (("int32", 7, 1.0, "float16"), ("int32", 5000, 10.0, "float32"),
                                     ("int64", 3, 0.0, "float64"), ("int64", 10 ** 9, 0.999, "float16")):
        yield Case("exponential_decay", {"Step": _step(s, step_dtype, (1,))}, None,
                   {**decay, "learning_rate": HALF_TIE, "decay_rate": rate, "dtype": out}, label=f"{s},{rate},{out}")
    cosine = {"learning_rate": 0.1, "step_each_epoch": 4, "epochs": 3}
    for s, step_dtype in ((0, "int64"), (3, "int32"), (4, "int64"), (11, "int32"), (12, "int64"), (18, "int64"),
                          (-1, "int32")):  # epochs 0, 0, 1, 2, 3 (the end), 4 (rising again), -1
        for out in ("float32",) if s not in (4, 12) else FLOATS:
            yield Case("cosine_decay", {"Step": _step(s, step_dtype)}, None, {**cosine, "dtype": out},
                       label=f"{s},{out}")
    warmup = {"warmup_steps": 10, "start_lr": 0.0, "end_lr": HALF_TIE}
    for out in FLOATS:
        for s in (0, 9, 10, 11):  # the ramp, its last step, the end of the warmup
            yield Case("linear_lr_warmup", {"Step": _step(s, "int64"), "LearningRate": np.array([0.05], out)},
                       None, warmup, label=f"{s}")
    for s in (3, 10):  # a NaN rate passed by while warming up
        yield Case("linear_lr_warmup", {"Step": _step(s, "int32"), "LearningRate": np.array(NAN, np.float32)},
                   None, warmup, label=f"{s},nan")
    yield Case("linear_lr_warmup", {"Step": _step(-3, "int32", (1,)), "LearningRate": np.array(INF)}, None,
               {**warmup, "start_lr": 1.0}, label="before the start")


def _labels(ids, dtype: str, column: bool) -> np.ndarray:
    ids = np.asarray(ids, dtype)
    return ids.reshape(-1, 1) if column else ids


TIES = np.array([[1.0, 1.0, 0.0, 1.0], [NAN, 2.0, NAN, 1.0], [0.5, 0.5, 0.1, 0.5], [-INF, -INF, -INF, -INF],
                 [INF, NAN, INF, 1.0], [0.0, -0.0, 0.0, 0.0]])
"""Scores with ties, NaN (above every number) and infinities: where ranks are decided by the class index."""


def metric_cases():
    for dtype in FLOATS:
        for (label_dtype, column), ks, average in ((("int32", False), (1, 4), "binary"), (("int64", True), (2,),
                                                                                           "macro")):
            label = _labels([3, 1, 1, 0, 2, 1], label_dtype, column)
            for k in ks:
                yield Case("accuracy", {"X": TIES.astype(dtype), "Label": label}, None, {"k": k},
                           label=f"ties,{k}")
            yield Case("precision_recall", {"X": TIES.astype(dtype), "Label": label}, None,
                       {"average": average, "pos_label": 1}, label=f"ties,{average}")
        x = _x((7, 5), dtype)
        yield Case("accuracy", {"X": x, "Label": rng.integers(0, 5, 7)}, None, {"k": 3}, label="random")
        yield Case("precision_recall", {"X": x, "Label": rng.integers(0, 5, 7)}, None, {"average": "macro"},
                   label="random")
    for op, attrs in (("accuracy", {"k": 1}), ("precision_recall", {"average": "binary", "pos_label": 0})):
        yield Case(op, {"X": np.zeros((0, 3), np.float32), "Label": np.zeros((0, 1), np.int64)}, None, attrs,
                   label="empty")
        yield Case(op, {"X": np.ones((4, 1), np.float64), "Label": np.zeros(4, np.int32)}, None, attrs,
                   label="one class")
        for bad in (3, -1):
            yield Case(op, {"X": np.ones((3, 3), np.float32), "Label": np.array([[0], [bad], [1]])}, None, attrs,
                       label=f"label {bad}")
    edges = np.array([-0.5, 0.0, -0.0, 0.25, 0.2500001, 0.5, 0.75, 0.9999, 1.0, 1.5, INF, -INF])  # 4 buckets + 1
    labels = np.array([0, 1, 0, 1, 1, 0, 7, 0, 1, -1, 0, 1])  # 7 and -1 are positives: != 0
    carried = np.arange(5.0), np.array([2.0, 0.0, 1.0, 0.0, 3.0])
    for dtype in FLOATS:
        p = edges.astype(dtype)
        for predict, label in ((p, labels.astype(np.int32)), (p[:, None], labels[:, None]),
                               (np.stack([1 - p, p], 1), labels)):
            yield Case("auc", {"Predict": predict, "Label": label, "StatPos": carried[0], "StatNeg": carried[1]},
                       None, {"num_thresholds": 4}, label=f"{dtype},{predict.ndim}")
    zeros = np.zeros(2), np.zeros(2)
    yield Case("auc", {"Predict": np.zeros(0), "Label": np.zeros(0, np.int64), "StatPos": zeros[0],
                       "StatNeg": zeros[1]}, None, {"num_thresholds": 1}, label="empty")
    yield Case("auc", {"Predict": np.array([0.3, 0.7]), "Label": np.array([1, 1]), "StatPos": zeros[0],
                       "StatNeg": zeros[1]}, None, {"num_thresholds": 1}, label="one class")
    yield Case("auc", {"Predict": np.array([0.3, NAN], np.float32), "Label": np.array([1, 0]), "StatPos": zeros[0],
                       "StatNeg": zeros[1]}, None, {"num_thresholds": 1}, label="nan")


CASES = [*norm_cases(), *schedule_cases(), *metric_cases()]

_SUMS = "float64 sums of squares added in another order (jax and torch reduce otherwise than numpy's pairwise sum)"
_BY_CONSTANT = "XLA divides by a constant as a product with its rounded reciprocal (AlgebraicSimplifier)"
_LIBM = f"each library's own pow and cos, an ulp apart in float64; {_BY_CONSTANT}"
ROUNDED = {"global_norm": _SUMS, "clip_by_global_norm": _SUMS, "exponential_decay": _LIBM, "cosine_decay": _LIBM,
           "linear_lr_warmup": _BY_CONSTANT, "accuracy": f"{_BY_CONSTANT}: the count of rows",
           "precision_recall": f"{_BY_CONSTANT}: the count of classes of a macro average"}
"""Ops whose float64 results an engine may round otherwise (``test_stated_once.TOLERANCE``), and why; the rest, and
every float16 and float32 result here, match bit for bit."""


def _exact(case: Case) -> bool:
    """Whether every engine must give numpy's bits: all but ``ROUNDED``'s float64 results."""
    given = [case.inputs[slot] for slot in ("X", "LearningRate", "Predict") if slot in case.inputs]
    inputs = [np.asarray(x).dtype.name for v in given for x in (v if isinstance(v, list) else [v])]
    outputs = [case.attrs["dtype"]] if "dtype" in case.attrs else inputs
    return case.op not in ROUNDED or "float64" not in outputs


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    assert_identical(run_case("numpy", case), run_case(backend, case), f"{case.id} on {backend}", _exact(case),
                     brief=backend == "xla" and case.op in ("accuracy", "precision_recall"))


ORT_REFUSES = {"auc": "a NaN score's bucket is Cast's integer for NaN, outside ScatterElements' range"}
"""Ops whose export ONNX Runtime refuses to run where the engines refuse the values; the others' exports run (ONNX
has no run-time error: a label outside the classes counts in none)."""


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    require("onnx")
    main, feed, fetch = with_fetch(case)
    want, model = run_case("numpy", case), export_onnx(main, fetch_list=fetch, include_updates=False)
    if isinstance(want, Exception) and case.op in ORT_REFUSES:
        with pytest.raises(Exception, match="ScatterElements"):
            run_ort(model, feed)
        return
    got = run_ort(model, feed)
    if not isinstance(want, Exception):
        assert_identical(want, [got[name] for name in fetch], f"{case.id} in ONNX Runtime", _exact(case))


@pytest.mark.parametrize("case", [c for c in CASES if c.label.startswith("label ") or c.label == "nan" and c.op == "auc"],
                         ids=lambda c: c.id)
def test_a_bad_label_and_a_nan_score_are_valueerrors_with_numpys_words_on_every_engine(case: Case):
    """The eager engines name the first bad label (``xp.check``'s detail); xla states the check."""
    require("jax")
    errors = {b: run_case(b, case) for b in ("numpy", "xla", "torch")}
    assert all(isinstance(e, ExecutionError) and "ValueError: " in str(e) for e in errors.values()), errors
    for backend in ("xla", "torch"):
        assert_identical(errors["numpy"], errors[backend], f"{case.id} on {backend}",
                         brief=backend == "xla" and case.op != "auc")


def _metrics_program(k: int, classes: int):
    """accuracy of scores whose rows and classes are met only at run time, precision (macro) and auc of rows met
    then."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, known = layers.data("x", [-1, -1], "float32"), layers.data("known", [-1, classes], "float32")
        y, p = layers.data("y", [-1, 1], "int64"), layers.data("p", [-1], "float64")
        acc = layers.accuracy(x, y, k=k)
        total, batch, stats = layers.auc(p, y, num_thresholds=7)
        fetch = [acc, layers.precision(known, y, "macro"), total, batch, *stats]
    return main, startup, [v.name for v in fetch]


@pytest.mark.parametrize("rows, classes, k", [(0, 3, 1), (1, 1, 1), (5, 4, 4), (5, 3, 4)])
def test_run_time_dims_and_carried_auc_counts_give_numpys_answer_on_every_engine(rows, classes, k):
    """Three runs, the auc counts updated in place between them; k past the classes met at run time is refused."""
    require("jax")
    main, startup, fetch = _metrics_program(k, classes)
    answers = {}
    for backend in ("numpy", "xla", "torch"):
        exe, scope, runs = Executor(backend=backend), Scope(), []
        exe.run(startup, scope=scope)
        for seed in range(3):
            draw = np.random.default_rng(seed)
            x = draw.integers(0, 3, (rows, classes)).astype(np.float32)
            feed = {"x": x, "known": x, "y": draw.integers(0, classes, (rows, 1)), "p": draw.random(rows)}
            try:
                runs.append(exe.run(main, feed=feed, fetch_list=fetch, scope=scope))
            except ExecutionError as e:
                runs.append(e)
        answers[backend] = runs
    for backend in ("xla", "torch"):
        for seed, (want, got) in enumerate(zip(answers["numpy"], answers[backend])):
            assert_identical(want, got, f"run {seed} on {backend}")
    assert isinstance(answers["numpy"][0], ExecutionError) == (k > classes)


@pytest.mark.parametrize("op_type, attrs", [("global_norm", {}), ("clip_by_global_norm", {"max_norm": 1.0})])
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_run_time_rows_of_the_norms_give_numpys_answer_on_every_engine_and_in_onnx(op_type, attrs, rows):
    require("jax")
    main = Program()
    block = main.global_block()
    block.create_var("x", (-1, 3), "float16")
    block.create_var("w", (2,), "float32")
    block.append_op(op_type, {"X": ["x", "w"]}, {"Out": ["out"] if op_type == "global_norm" else ["out", "w2"]},
                    attrs)
    feed, fetch = {"x": _x((rows, 3), "float16"), "w": _x((2,), "float32")}, [n for n in ("out", "w2")
                                                                               if block.has_var(n)]
    answers = {b: Executor(backend=b).run(main, feed=feed, fetch_list=fetch, scope=Scope())
               for b in ("numpy", "xla", "torch")}
    for backend in ("xla", "torch"):
        assert_identical(answers["numpy"], answers[backend], f"{op_type} of [{rows}, 3] on {backend}", exact=False)
    require("onnx")
    got = run_ort(export_onnx(main, fetch_list=fetch, include_updates=False), feed)
    for name, want in zip(fetch, answers["numpy"]):
        assert_close(got[name], want, name)


def test_no_engine_writes_these_ops_by_hand():
    from gradgen.framework.backend.numpy.kernels import FAMILIES as NUMPY
    from gradgen.framework.backend.torch.kernels import FAMILIES as TORCH
    from gradgen.framework.backend.xla.lowerings import FAMILIES as XLA
    from gradgen.framework.tools.onnx.export import OWN_EXPORTS
    from gradgen.program import OP_SCHEMAS

    ops = {c.op for c in CASES}
    assert len(ops) == 9 and all(OP_SCHEMAS[t].compute is not None for t in ops)
    for families, table in ((NUMPY, "KERNELS"), (TORCH, "KERNELS"), (XLA, "LOWERINGS")):
        assert not ops & {t for f in families for t in getattr(f, table, {})}
    assert ops <= set(OWN_EXPORTS)
