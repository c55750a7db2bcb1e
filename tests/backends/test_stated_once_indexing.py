"""The indexing family stated once (``program/ops/indexing.py``): take_along_axis and its gradient, scatter,
scatter_add, sort, argsort and top_k, each one ``compute`` over ``xp`` that every engine derives its kernel from
(rows written at positions: each engine's ``xp.scatter_rows``). On the edges of each op's domain (every dtype;
ties, NaN, infinities and -0.0 sorted and scattered; repeats added in index order, where the order changes the
rounding; negative indexes; zero-size and size-1 dims; -1 dims met at run time) every engine gives the numpy
engine's answer bit for bit, and refuses an index out of range, a repeated scatter position or a k past the axis
with the same error type and reason; ONNX Runtime runs the export to the executor's answer."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from gradgen.framework import export_onnx
from gradgen.program import OP_SCHEMAS, Program
from tests.backends.test_stated_once import assert_identical, run_case, with_fetch
from tests.framework.op_harness import Case
from tests.onnx.runtime import require, run_ort

OPS = ("take_along_axis", "take_along_axis_grad", "scatter", "scatter_add", "sort", "argsort", "top_k")
FLOATS = ("float16", "float32", "float64")
INTS = ("int32", "int64")
rng = np.random.default_rng(7)
SPECIAL = np.array([0.5, -0.0, np.inf, 1.5, np.nan, -2.0, -np.inf, 0.0, 0.5, -np.nan, 2.0, -0.0])
"""Twelve values with each float edge and ties in it: NaN of both signs, both infinities, both zeros, 0.5 twice."""
CANCELS = np.array([1e4, 1.0, -1e4, 1.0, 3.0, 0.25, -0.0, 2.0 ** -10])
"""Updates whose sum depends on the order they are added in (float16 loses the 1.0 next to 1e4)."""


def _values(shape, dtype: str) -> np.ndarray:
    """Small numbers in ``dtype`` with ties (integers from -3 to 3; bools)."""
    if dtype == "bool":
        return rng.random(shape) > 0.5
    return rng.integers(-3, 4, shape).astype(dtype) if dtype in INTS else (rng.integers(-6, 7, shape) / 4).astype(dtype)


def _index(shape, size: int, dtype: str = "int64") -> np.ndarray:
    """Indexes into an axis of ``size``, negative ones among them (counted from the end)."""
    return rng.integers(-size, size, shape).astype(dtype) if size else np.zeros(shape, dtype)


def take_cases():
    for (dtype, index_dtype), axis in itertools.product(zip(FLOATS + INTS + ("bool",), INTS * 3), (0, -1)):
        x = _values((2, 3, 4), dtype)
        shape = (2, 3, 4)[:axis % 3] + (5,) + (2, 3, 4)[axis % 3 + 1:]
        yield Case("take_along_axis", {"X": x, "Index": _index(shape, x.shape[axis], index_dtype)}, None,
                   {"axis": axis}, label=f"{dtype},{axis}")
    x = SPECIAL.reshape(3, 4).astype("float16")
    yield Case("take_along_axis", {"X": x, "Index": _index((3, 6), 4)}, None, {"axis": 1}, label="special")
    x = _values((2, 3), "float32")
    for label, shapes, axis in (("empty index", ((2, 3), (2, 0)), 1), ("empty axis", ((2, 0), (2, 0)), 1),
                                ("empty rows", ((0, 3), (0, 2)), 1), ("size 1", ((1, 1), (1, 4)), 1)):
        x_edge = np.ones(shapes[0], "float32")
        yield Case("take_along_axis", {"X": x_edge, "Index": _index(shapes[1], shapes[0][1])}, None, {"axis": axis},
                   label=label)
    for bad in (3, -4):  # one past each end of [-3, 3)
        yield Case("take_along_axis", {"X": x, "Index": np.array([[0, bad], [1, 2]])}, None, {"axis": 1},
                   label=f"out of range {bad}")
    yield Case("take_along_axis", {"X": np.zeros((2, 0), "float32"), "Index": np.zeros((2, 1), np.int64)}, None,
               {"axis": 1}, label="from an empty axis")


def take_grad_cases():
    for dtype, axis in itertools.product(FLOATS, (0, -1)):
        x = _values((2, 3, 4), dtype)
        shape = (2, 3, 4)[:axis % 3] + (6,) + (2, 3, 4)[axis % 3 + 1:]  # repeats: 6 indexes into 2, 3 or 4
        yield Case("take_along_axis_grad", {"X": x, "Index": _index(shape, x.shape[axis]),
                                            "Out@GRAD": _values(shape, dtype)}, None, {"axis": axis},
                   label=f"{dtype},{axis}")
    for dtype in FLOATS:  # all into one or two places, in an order that rounds
        repeats = np.array([[0, 1, -2, 0, 0, 0, 0, 1]])
        yield Case("take_along_axis_grad", {"X": np.zeros((1, 2), dtype), "Index": repeats,
                                            "Out@GRAD": CANCELS.astype(dtype)[None]}, None, {"axis": 1},
                   label=f"{dtype},order")
    yield Case("take_along_axis_grad", {"X": np.zeros((3, 4), "float32"), "Index": _index((3, 6), 4, "int32"),
                                        "Out@GRAD": SPECIAL[:6].repeat(3).reshape(3, 6).astype("float32")}, None,
               {"axis": 1}, label="special")
    yield Case("take_along_axis_grad", {"X": np.zeros((2, 3)), "Index": np.zeros((2, 0), np.int64),
                                        "Out@GRAD": np.zeros((2, 0))}, None, {"axis": 1}, label="empty index")
    yield Case("take_along_axis_grad", {"X": np.zeros((0, 3)), "Index": np.zeros((0, 2), np.int64),
                                        "Out@GRAD": np.zeros((0, 2))}, None, {"axis": 1}, label="empty rows")
    yield Case("take_along_axis_grad", {"X": np.zeros((2, 3)), "Index": np.array([[0, 3], [1, 1]]),
                                        "Out@GRAD": np.ones((2, 2))}, None, {"axis": 1}, label="out of range")


def _updates(x_shape, index_shape, axis: int, dtype: str) -> np.ndarray:
    ax = axis % len(x_shape)
    return _values(tuple(x_shape[:ax]) + tuple(index_shape) + tuple(x_shape[ax + 1:]), dtype)


def scatter_cases():
    for (dtype, index_dtype), (axis, index) in itertools.product(
            zip(FLOATS + INTS + ("bool",), INTS * 3), ((0, [2, -4, 1]), (-1, [[3, 0], [-2, 1]]))):
        index = np.array(index, index_dtype)
        x = _values((4, 3, 4), dtype)
        yield Case("scatter", {"X": x, "Index": index, "Updates": _updates(x.shape, index.shape, axis, dtype)},
                   None, {"axis": axis}, label=f"{dtype},{axis}")
    for (dtype, index_dtype), (axis, index) in itertools.product(
            zip(FLOATS + INTS, INTS * 3), ((0, [2, -2, 1, 2, 2]), (1, [[-1, 2], [0, 2]]))):  # repeats accumulate
        index = np.array(index, index_dtype)
        x = _values((4, 3), dtype)
        yield Case("scatter_add", {"X": x, "Index": index, "Updates": _updates(x.shape, index.shape, axis, dtype)},
                   None, {"axis": axis}, label=f"{dtype},{axis}")
    for dtype in FLOATS:
        x = SPECIAL.reshape(4, 3).astype(dtype)
        updates = np.roll(SPECIAL, 5).reshape(4, 3).astype(dtype)
        yield Case("scatter", {"X": x, "Index": np.array([1, 3, 0, 2]), "Updates": updates}, None, {},
                   label=f"{dtype},special")
        yield Case("scatter_add", {"X": x, "Index": np.array([1, 3, 1, 2]), "Updates": updates}, None, {},
                   label=f"{dtype},special")
        yield Case("scatter_add", {"X": np.array([0.0, -0.0], dtype), "Index": np.array([0, 1, 1, 1, 1, 1, 1, 1]),
                                   "Updates": CANCELS.astype(dtype)}, None, {}, label=f"{dtype},order")
    yield Case("scatter_add", {"X": np.array([-0.0, 0.0]), "Index": np.array([0, 0, 1]),
                               "Updates": np.array([-0.0] * 3)}, None, {}, label="-0 + -0")
    wraps = np.array([2 ** 31 - 1, -2 ** 31], np.int32)
    yield Case("scatter_add", {"X": wraps, "Index": np.array([0, 1]), "Updates": np.array([1, -1], np.int32)}, None, {},
               label="int32 wraps")
    for op in ("scatter", "scatter_add"):
        yield Case(op, {"X": np.ones((3, 2)), "Index": np.zeros(0, np.int64), "Updates": np.ones((0, 2))}, None, {},
                   label="empty index")
        yield Case(op, {"X": np.ones((3, 0)), "Index": np.array([2, 0]), "Updates": np.ones((2, 0))}, None, {},
                   label="empty rows")
        for bad in (3, -4):
            yield Case(op, {"X": np.ones((3, 2)), "Index": np.array([0, bad]), "Updates": np.ones((2, 2))}, None, {},
                       label=f"out of range {bad}")
    yield Case("scatter", {"X": np.ones((3, 2)), "Index": np.array([2, -1]), "Updates": np.ones((2, 2))}, None, {},
               label="repeated position")


def sort_cases():
    for dtype in FLOATS + INTS + ("bool",):
        x = _values((3, 5), dtype)
        for axis, descending in ((-1, False), (0, True)):
            yield Case("sort", {"X": x}, None, {"axis": axis, "descending": descending}, label=f"{dtype},{descending}")
        if dtype in ("float16", "int32", "bool"):
            yield Case("argsort", {"X": x}, None, {"axis": -1, "descending": True}, label=dtype)
    for dtype, descending in itertools.product(FLOATS, (False, True)):
        yield Case("sort", {"X": SPECIAL.reshape(2, 6).astype(dtype)}, None, {"descending": descending},
                   label=f"{dtype},special,{descending}")
    yield Case("argsort", {"X": SPECIAL}, None, {"descending": False}, label="special")
    for shape in ((3, 0), (0, 3), (1,), (4, 1)):
        yield Case("sort", {"X": _values(shape, "float32")}, None, {"descending": True}, label="edge")
    yield Case("argsort", {"X": _values((2, 0), "int32")}, None, {}, label="edge")


def top_k_cases():
    for dtype in FLOATS + INTS + ("bool",):
        x = _values((3, 6), dtype)
        for k, largest in ((1, True), (6, False)):
            yield Case("top_k", {"X": x}, None, {"k": k, "largest": largest}, label=f"{dtype},{k},{largest}")
        if dtype in ("float32", "int64"):
            yield Case("top_k", {"X": x}, None, {"k": 2, "axis": 0}, label=f"{dtype},axis 0")
    for dtype, largest in (("float16", True), ("float32", False), ("float64", True), ("float64", False)):
        yield Case("top_k", {"X": SPECIAL.reshape(1, 12).astype(dtype)}, None, {"k": 7, "largest": largest},
                   label=f"{dtype},special")
    yield Case("top_k", {"X": _values((2, 3), "int64")}, None, {"k": 0}, label="k=0")
    yield Case("top_k", {"X": np.zeros((0, 3), "float32")}, None, {"k": 2}, label="empty rows")
    yield Case("top_k", {"X": np.zeros((2, 0), "float32")}, None, {"k": 0}, label="empty axis")


CASES = [*take_cases(), *take_grad_cases(), *scatter_cases(), *sort_cases(), *top_k_cases()]


def _refusal(error: Exception) -> tuple[str, str]:
    """An engine's refusal as (error type, reason), the offending index an eager engine names read as "an index"
    (xla states the range only)."""
    text = str(error)
    kind = re.search(r"\b(\w+Error): ", text).group(1)
    reason = re.sub(r"index -?\d+ at \[[\d, ]*\]", "an index", text.split(f"{kind}: ", 1)[1])
    return kind, reason.split(" (")[0].split(";")[0]


def assert_same(want, got, what: str) -> None:
    """The numpy engine's answer bit for bit, or its refusal: the same error type and reason."""
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert isinstance(want, Exception) and isinstance(got, Exception), f"{what}: numpy {want!r}, engine {got!r}"
        assert _refusal(want) == _refusal(got), f"{what}: numpy {want}, engine {got}"
        return
    assert_identical(want, got, what)


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    assert_same(run_case("numpy", case), run_case(backend, case), f"{case.id} on {backend}")


def test_the_refusals_name_the_index_on_the_eager_engines():
    """numpy and torch name the first index out of range and where it is; xla states the range."""
    case = next(c for c in CASES if c.label == "out of range -4" and c.op == "scatter")
    for backend in ("numpy", "torch"):
        assert ("IndexError: scatter: index -4 at [1] is out of bounds for axis 0 with size 3 (1 of 2 indexes "
                "outside [-3, 3))") in str(run_case(backend, case))
    assert "IndexError: scatter: an index is out of bounds for axis 0 with size 3" in str(run_case("xla", case))


ORT_ANSWERS = "ONNX has no run-time error for an index out of range or a repeated position: ScatterND picks one"
"""Why the export's refusals are not checked: ONNX Runtime raises for some of the ops' bad indexes, not all."""
ORT_LACKS = {"take_along_axis_grad": "ONNX Runtime's CPU ScatterElements has no float16 kernel that adds",
             "scatter_add": "ONNX Runtime's CPU ScatterND has no float16 kernel that adds"}
"""Ops whose float16 export ONNX Runtime cannot run, and why."""


@pytest.mark.parametrize("case", [c for c in CASES if not isinstance(run_case("numpy", c), Exception)],
                         ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    """(The cases numpy refuses are left out: ``ORT_ANSWERS``.)"""
    require("onnx")
    want = run_case("numpy", case)
    main, feed, fetch = with_fetch(case)
    model = export_onnx(main, fetch_list=fetch, include_updates=False)
    if case.op in ORT_LACKS and case.inputs["X"].dtype == np.float16:
        with pytest.raises(Exception, match="MLFloat16 data type is not supported"):
            run_ort(model, feed)
        return
    got = run_ort(model, feed)
    assert_identical(want, [got[n] for n in fetch], f"{case.id} in ONNX Runtime")


def _run_time_program(op_type: str, x_dims, index_dims, attrs: dict) -> Program:
    """``op_type`` of an X (and Index) whose -1 dims are met only at run time."""
    main = Program()
    block = main.global_block()
    block.create_var("x", x_dims, "float32")
    ins = {"X": ["x"]}
    if index_dims is not None:
        block.create_var("index", index_dims, "int64")
        ins["Index"] = ["index"]
    outs = {s.name: [f"out_{s.name}"] for s in OP_SCHEMAS[op_type].outputs}
    block.append_op(op_type, ins, outs, attrs)
    return main


RUN_TIME = [("take_along_axis", (-1, 3), (-1, 2), {"axis": 1}), ("sort", (-1, 3), None, {"axis": 0}),
            ("argsort", (2, -1), None, {"descending": True}), ("top_k", (-1, 3), None, {"k": 2, "axis": 0})]


@pytest.mark.parametrize("op_type, x_dims, index_dims, attrs", RUN_TIME, ids=[r[0] for r in RUN_TIME])
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_run_time_dims_give_numpys_answer_on_every_engine_and_in_onnx(op_type, x_dims, index_dims, attrs, rows):
    main = _run_time_program(op_type, x_dims, index_dims, attrs)
    feed = {"x": _values(tuple(rows if d == -1 else d for d in x_dims), "float32")}
    if index_dims is not None:
        feed["index"] = _index(tuple(rows if d == -1 else d for d in index_dims), 3)
    fetch = [f"out_{s.name}" for s in OP_SCHEMAS[op_type].outputs]
    answers = {b: run_case(b, None, build=lambda _: (main, main.global_block().ops[0], feed))
               for b in ("numpy", "xla", "torch")}
    for backend in ("xla", "torch"):
        assert_same(answers["numpy"], answers[backend], f"{op_type} of {rows} rows on {backend}")
    if isinstance(answers["numpy"], Exception):  # top_k's k past the rows met at run time: refused alike
        assert "ValueError: top_k: k=2 is more than the size" in str(answers["numpy"])
        return
    require("onnx")
    got = run_ort(export_onnx(main, fetch_list=fetch, include_updates=False), feed)
    assert_identical(answers["numpy"], [got[n] for n in fetch], f"{op_type} of {rows} rows in ONNX Runtime")


def test_no_engine_writes_these_ops_by_hand():
    """Each op's math is its compute; the engines give only ``xp.scatter_rows``, the export stays its own."""
    from gradgen.framework.backend.numpy.kernels import KERNELS, XP as NUMPY_XP, indexing as numpy_indexing
    from gradgen.framework.backend.torch.kernels import XP as TORCH_XP
    from gradgen.framework.backend.xla.lowerings import XP as XLA_XP, indexing as xla_indexing
    from gradgen.framework.tools.onnx import lower_index

    assert all(OP_SCHEMAS[t].compute is not None for t in OPS)
    assert not hasattr(numpy_indexing, "KERNELS") and not hasattr(xla_indexing, "LOWERINGS")
    assert all(hasattr(xp, "scatter_rows") for xp in (NUMPY_XP, XLA_XP, TORCH_XP))
    assert set(OPS) <= set(KERNELS) and set(OPS) == set(lower_index.OWN_EXPORTS) == set(lower_index.LOWERINGS)
