"""The slicing and gathering ops, their adjoints, the embedding lookup, einsum and prod_others, whose math moved
beside their schemas (one ``compute`` over ``xp``, each engine's kernel derived from it): on the edges of each op's
domain (float16, float64, the integers and bool, NaN, infinities and signed zeros, zero-size and size-1 dims,
negative indices and strides, dims declared -1 that meet at run time) every engine gives the numpy engine's answer
bit for bit (or to rounding where it sums in another order: ``ROUNDED``), or refuses where it refuses, with the same
error; ONNX Runtime runs the export (each op's own, ``OWN_EXPORTS``) to the executor's answer."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gradgen.framework import export_onnx
from gradgen.framework.tools.onnx.errors import OnnxExportError
from gradgen.program import OP_SCHEMAS
from tests.backends.test_stated_once import FLOATS, INTS, assert_covers, assert_identical, run_case, with_fetch
from tests.backends.test_stated_once_manipulation import DTYPES, RunTimeCase, _program, _special, _values
from tests.framework.op_harness import Case
from tests.onnx.runtime import assert_close, require, run_ort


def _variants(table, dtype: str, few: tuple[str, ...]):
    """``table``'s labels: all of them for float32, ``few`` of them for the other dtypes (the cases stay few)."""
    return table if dtype == "float32" else few


SLICES = {"rows": ([0], [1], [4], []), "both backwards": ([0, 1], [-1, 3], [-6, 0], [-2, -1]),
          "clamped": ([-1], [-100], [100], [3]), "empty": ([0, 1], [3, 1], [1, 3], [1, -1]),
          "one left": ([1], [-1], [-2], [-5])}
"""label -> (axes, starts, ends, strides) of a [5, 4] X: steps of 1, 2, 3 and backwards, Python's clamping, nothing
taken, one element taken backwards by a step longer than the axis."""


def _slice_attrs(label: str) -> dict:
    return dict(zip(("axes", "starts", "ends", "strides"), SLICES[label]))


def _sliced_shape(shape, label: str) -> tuple:
    axes, starts, ends, strides = SLICES[label]
    out = list(shape)
    for a, s, e, st in zip(axes, starts, ends, strides or [1] * len(axes)):
        out[a] = len(range(*slice(s, e, st).indices(shape[a])))
    return tuple(out)


def slice_cases():
    for dtype in DTYPES:
        for label in _variants(SLICES, dtype, ("both backwards",)):
            yield Case("slice", {"X": _values((5, 4), dtype)}, None, _slice_attrs(label), label=f"{dtype},{label}")
    for dtype in FLOATS:
        yield Case("slice", {"X": _special((5, 4), dtype)}, None, _slice_attrs("both backwards"),
                   label=f"{dtype},special")
    yield Case("slice", {"X": _values((0, 4), "int32")}, None, _slice_attrs("clamped"), label="zero-size")
    yield Case("slice", {"X": _values((1, 1), "float32")}, None, _slice_attrs("both backwards"), label="size 1")
    yield Case("slice", {"X": _values((), "float64")}, None, {"axes": [], "starts": [], "ends": []}, label="0-d")
    yield RunTimeCase("slice", {"X": _values((5, 4), "float64")}, None, _slice_attrs("both backwards"),
                      label="run-time dim", run_time=(0,))


def slice_grad_cases():
    for dtype in FLOATS:
        for label in _variants(SLICES, dtype, ("both backwards",)):
            dout = _values(_sliced_shape((5, 4), label), dtype)
            yield Case("slice_grad", {"X": np.zeros((5, 4), dtype), "Out@GRAD": dout}, None, _slice_attrs(label),
                       label=f"{dtype},{label}")
        dout = _special(_sliced_shape((5, 4), "rows"), dtype)  # -0.0 kept, NaN and inf placed, zeros around
        yield Case("slice_grad", {"X": np.zeros((5, 4), dtype), "Out@GRAD": dout}, None, _slice_attrs("rows"),
                   label=f"{dtype},special")
    yield Case("slice_grad", {"X": np.zeros((0, 4)), "Out@GRAD": np.zeros((0, 2))}, None, _slice_attrs("clamped"),
               label="zero-size")
    x, dout = np.zeros((5, 4), "float32"), _values((5, 2), "float32")
    yield RunTimeCase("slice_grad", {"X": x, "Out@GRAD": dout}, None,
                      {"axes": [1], "starts": [3], "ends": [-5], "strides": [-2]}, label="run-time dim",
                      run_time=(0,))
    yield RunTimeCase("slice_grad", {"X": x, "Out@GRAD": _values((2, 4), "float32")}, None, _slice_attrs("rows")
                      | {"ends": [3]}, label="run-time sliced dim", run_time=(0,))


INDEXES = {"scalar": np.array(-2), "negative, repeated": np.array([3, -1, 0, -5, 3]),
           "matrix": np.array([[1, -2], [0, 4]]), "none": np.zeros((0,), int),
           "past the end": np.array([1, 5]), "before the start": np.array([0, -6])}
"""label -> Index into an axis of size 5 (the last two refused: out of bounds)."""


def gather_cases():
    for dtype in DTYPES:
        for label in _variants(INDEXES, dtype, ("negative, repeated", "past the end")):
            index = INDEXES[label]
            yield Case("gather", {"X": _values((5, 3), dtype), "Index": index.astype("int64")}, None,
                       label=f"{dtype},{label}")
    for label in ("matrix", "past the end"):  # along the last axis, int32 indices
        yield Case("gather", {"X": _values((2, 5), "float32"), "Index": INDEXES[label].astype("int32")}, None,
                   {"axis": -1}, label=f"int32 axis -1,{label}")
    yield Case("gather", {"X": _special((6, 2), "float16"), "Index": np.arange(5, -7, -1)}, None, label="special")
    yield Case("gather", {"X": np.zeros((0, 2)), "Index": np.zeros((0,), "int32")}, None, label="empty axis")
    yield Case("gather", {"X": np.zeros((0, 2)), "Index": np.zeros((1,), "int32")}, None, label="empty axis, read")
    yield Case("gather", {"X": _values((1,), "int32"), "Index": np.array(-1)}, None, label="size 1")
    yield RunTimeCase("gather", {"X": _values((5, 3), "float32"), "Index": np.array([4, -5, 2])}, None,
                      label="run-time dim", run_time=(0,))
    yield RunTimeCase("gather", {"X": _values((3, 3), "float32"), "Index": np.array([4, 1, 2])}, None,
                      label="run-time dim, past the end", run_time=(0,))


def gather_grad_cases():
    for dtype in FLOATS:
        for label in _variants(INDEXES, dtype, ("negative, repeated",)):
            index = INDEXES[label]
            dout = _values(index.shape + (3,), dtype)
            yield Case("gather_grad", {"X": np.zeros((5, 3), dtype), "Index": index, "Out@GRAD": dout}, None,
                       label=f"{dtype},{label}")
        index = np.array([0, 1, 0, 1, 2, 2])  # inf + -inf at a repeat is NaN, -0.0 + -0.0 onto 0 is 0.0
        yield Case("gather_grad", {"X": np.zeros((3,), dtype), "Index": index,
                                   "Out@GRAD": np.array([np.inf, np.nan, -np.inf, 1, -0.0, -0.0], dtype)}, None,
                   label=f"{dtype},special")
    # repeats added one after another in float16: 2048 + 1 + 1 + 1 stays 2048 (a pairwise sum would give 2052)
    yield Case("gather_grad", {"X": np.zeros((2,), "float16"), "Index": np.array([1, 1, 1, 1], "int32"),
                               "Out@GRAD": np.array([2048, 1, 1, 1], "float16")}, None, label="float16 in order")
    yield Case("gather_grad", {"X": np.zeros((2, 5)), "Index": np.array([[4, -1], [0, 0]], "int32"),
                               "Out@GRAD": _values((2, 2, 2), "float64")}, None, {"axis": 1}, label="axis 1")
    yield Case("gather_grad", {"X": np.zeros((0, 2)), "Index": np.zeros((0,), "int64"),
                               "Out@GRAD": np.zeros((0, 2))}, None, label="empty axis")
    yield RunTimeCase("gather_grad", {"X": np.zeros((4, 2), "float32"), "Index": np.array([3, 3, -4]),
                                      "Out@GRAD": _values((3, 2), "float32")}, None, label="run-time dim",
                      run_time=(0,))


IDS = {"one": np.array(2), "rows": np.array([4, 0, 4]), "matrix": np.array([[1, 2], [3, 0]]),
       "none": np.zeros((0, 2), int), "past the end": np.array([[0, 5]]), "negative": np.array([-1])}
"""label -> Ids into a table of 5 rows (the last two refused: an id outside [0, 5), -1 too)."""


def lookup_table_cases():
    for dtype in FLOATS:
        for label in _variants(IDS, dtype, ("rows",)):
            ids = IDS[label]
            yield Case("lookup_table", {"W": _values((5, 3), dtype), "Ids": ids.astype("int64")}, None,
                       label=f"{dtype},{label}")
        yield Case("lookup_table", {"W": _special((5, 2), dtype), "Ids": np.array([4, 3, 2, 1, 0], "int32")}, None,
                   label=f"{dtype},special")
    yield Case("lookup_table", {"W": np.zeros((0, 3)), "Ids": np.zeros((0,), "int32")}, None, label="empty table")
    yield Case("lookup_table", {"W": np.zeros((0, 3)), "Ids": np.zeros((1,), "int32")}, None,
               label="empty table, read")
    yield Case("lookup_table", {"W": _values((1, 1), "float32"), "Ids": np.array([0, 0])}, None, label="size 1")
    yield RunTimeCase("lookup_table", {"W": _values((5, 3), "float32"), "Ids": np.array([4, 0])}, None,
                      label="run-time dim", run_time=(0,))


EQUATIONS = {"product": ("ij,jk->ik", (3, 4), (4, 2)), "ellipsis": ("...ij,...jk", (2, 3, 4), (4, 5)),
             "transpose": ("ij->ji", (2, 3)), "sum": ("ij->", (3, 4)), "dot": ("i,i", (5,), (5,)),
             "size 1 broadcast": ("ij,ij->ij", (1, 3), (2, 3)), "sum of nothing": ("ij,jk->ik", (3, 0), (0, 2)),
             "three": ("bij,bjk,bk->bi", (2, 3, 4), (2, 4, 5), (2, 5))}
"""label -> (equation, operand shapes...); "sum of nothing" gives zeros."""


def einsum_cases():
    for dtype in FLOATS + INTS:
        for label in _variants(EQUATIONS, dtype, ("product", "three")):
            equation, *shapes = EQUATIONS[label]
            yield Case("einsum", {"Operands": [_values(s, dtype) for s in shapes]}, None, {"equation": equation},
                       label=f"{dtype},{label}")
    for dtype in FLOATS:  # inf * 0 and inf - inf are NaN, NaN spreads along its row and column
        yield Case("einsum", {"Operands": [_special((3, 4), dtype), _values((4, 2), dtype)]}, None,
                   {"equation": "ij,jk->ik"}, label=f"{dtype},special")
    yield RunTimeCase("einsum", {"Operands": [_values((6, 4), "float32"), _values((6, 4), "float32")]}, None,
                      {"equation": "ij,ij->i"}, label="run-time dim", run_time=(0,))


def prod_others_cases():
    x = np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 0.0, -2.0], [1.0, -1.0, 4.0, 0.25]])  # one zero, two zeros, none
    for dtype in FLOATS + INTS:
        for dim, reduce_all in _variants((([], False), ([1], False), ([-2], False), ([0, 1], False), ([0], True)), dtype,
                                         (([0, 1], False),)):
            yield Case("prod_others", {"X": (x * 2).astype(dtype)}, None, {"dim": dim, "reduce_all": reduce_all},
                       label=f"{dtype},{dim},{reduce_all}")
        yield Case("prod_others", {"X": _values((2, 0, 3), dtype)}, None, {"dim": [1]}, label=f"{dtype},empty")
    yield Case("prod_others", {"X": _values((0, 3), "int64")}, None, {"dim": [1]}, label="no rows")
    yield Case("prod_others", {"X": _values((), "float16")}, None, {"dim": []}, label="0-d")
    for dtype in FLOATS:  # 0 * inf is NaN, -0.0 gives its sign, NaN spreads
        yield Case("prod_others", {"X": _special((3, 4), dtype)}, None, {"dim": [1]}, label=f"{dtype},special")
    yield Case("prod_others", {"X": np.array([[60000.0, 2.0, 0.5]], "float16")}, None, {"dim": [1]},
               label="float16 overflows in order")
    yield Case("prod_others", {"X": np.array([2 ** 20, 2 ** 15, 3], "int32")}, None, {"dim": [0]},
               label="int32 wraps")
    yield RunTimeCase("prod_others", {"X": _values((4, 3), "float64")}, None, {"dim": [0]}, label="run-time dim",
                      run_time=(0,))


CASES = [*slice_cases(), *slice_grad_cases(), *gather_cases(), *gather_grad_cases(), *lookup_table_cases(),
         *einsum_cases(), *prod_others_cases()]

ROUNDED = {"einsum": "numpy contracts pairs through BLAS, XLA and ATen through their own products: the float sums "
                     "run in another order"}
"""Ops whose finite floats an engine may round otherwise (to ``test_stated_once.TOLERANCE``), and why; the rest
match bit for bit."""

REFUSAL = re.compile(r"(\w+Error): [^;]*?( is out of bounds for axis \d+ with size \d+| is outside \[0, \d+\))")
"""The words a refusal says on every engine: its error type and the reason after the value it names (numpy and
torch name the offending index, ``xp.check``'s ``detail``; the xla engine, which traces, gives the check's words)."""


def _refusal(error: Exception) -> tuple[str, str]:
    found = REFUSAL.search(str(error))
    assert found, str(error)
    return found.groups()


ORT_REFUSES = {("gather_grad", "float16"): "ONNX Runtime's CPU ScatterElements adds no float16"}
"""(op, dtype) pairs ONNX Runtime cannot run where there is something to compute, and why."""

ORT_DIFFERS = {("prod_others", "int32 wraps"): "ONNX Runtime's int32 ReduceProd saturates at 2**31 - 1 where numpy "
                                               "wraps (ONNX leaves integer overflow undefined)"}
"""Cases (by op and label) whose export ONNX Runtime runs to other values, and why."""

ORT_ZERO_SIGNS = {"prod_others": "ONNX Runtime's ReduceProd over the middle axis of the export's [rows, n, n] masked "
                                 "rows gives 0.5 * -0.0 * 1.5 as +0.0, where the graph states -0.0 (onnx.reference "
                                 "gives -0.0, as the engines do)"}
"""Ops whose exported zeros ONNX Runtime may sign otherwise, and why (their values are compared all the same)."""

EXPORT_REFUSED = {("slice_grad", "run-time sliced dim"): "X has unknown sizes on the sliced axes"}
"""Cases (by op and label) the exporter refuses (``lower_tensor.LIMITS``), and what it says."""


def _run(backend: str, case: Case):
    return run_case(backend, case, _program)


def test_the_cases_cover_every_op_converted_here():
    converted = {"slice", "slice_grad", "gather", "gather_grad", "lookup_table", "einsum", "prod_others"}
    assert_covers(CASES, converted)


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    want, got = _run("numpy", case), _run(backend, case)
    if isinstance(want, Exception) and isinstance(got, Exception):
        assert _refusal(want) == _refusal(got), f"{case.id} on {backend}: numpy {want}, engine {got}"
        return
    assert_identical(want, got, f"{case.id} on {backend}", case.op not in ROUNDED)


@pytest.mark.parametrize("case", [c for c in CASES if c.op in {"gather", "gather_grad", "slice_grad"}
                                  and not c.label.startswith(("float16,", "float64,", "int", "bool"))],
                         ids=lambda c: c.id)
def test_numpys_faster_kernels_give_the_computes_answer(case: Case):
    """numpy's gather, gather_grad and slice_grad stay hand-written where they measured faster (``kernels.FASTER``):
    the derived kernel's numbers bit for bit, or its refusal."""
    from gradgen.framework.backend.numpy.kernels import FASTER, KERNELS, XP
    from gradgen.framework.backend.numpy.kernels.derived import derived_kernel

    assert case.op in FASTER
    _, op, feed = _program(case)
    arrays = [feed[n] for s in OP_SCHEMAS[case.op].inputs for n in op.input(s.name)]
    results = []
    for kernel in (KERNELS[case.op](op), derived_kernel(OP_SCHEMAS[case.op], XP)(op)):
        try:
            with np.errstate(all="ignore"):  # inf + -inf at a repeat
                results.append([np.asarray(kernel(*arrays))])
        except (IndexError, ValueError) as e:
            results.append(e)
    faster, derived = results
    if isinstance(faster, IndexError) and isinstance(derived, IndexError):  # numpy's own words: the same reason
        reason = str(derived).split(" is out of bounds ")[1].split(" (")[0]
        assert f"is out of bounds {reason}" in str(faster), f"{case.id}: {faster} against {derived}"
        return
    assert_identical(*results, case.id)


def test_the_refusals_are_numpys_and_name_the_index():
    """The cases the engines must refuse are those numpy refuses: an index out of bounds (an IndexError naming it,
    as numpy's take does), an id outside the table (a ValueError naming it, and where it is)."""
    refused = {f"{c.op},{c.label}": str(_run("numpy", c)) for c in CASES if isinstance(_run("numpy", c), Exception)}
    out_of_range = {f"{c.op},{c.label}" for c in CASES
                    if c.label.endswith(("past the end", "before the start", ",negative", ", read"))}
    assert refused.keys() == out_of_range
    assert "IndexError: index 5 is out of bounds for axis 0 with size 5" in refused["gather,float32,past the end"]
    assert "IndexError: gather_grad: index -6 at [1] is out of bounds" in refused["gather_grad,float32,before the start"]
    assert "ValueError: id 5 at index [0, 1] is outside [0, 5)" in refused["lookup_table,float32,past the end"]


@pytest.mark.parametrize("case", [c for c in CASES if not isinstance(_run("numpy", c), Exception)],
                         ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    require("onnx")
    main, feed, fetch = with_fetch(case, _program)
    refused = EXPORT_REFUSED.get((case.op, case.label))
    if refused:
        with pytest.raises(OnnxExportError, match=refused):
            export_onnx(main, fetch_list=fetch, include_updates=False)
        return
    want, model = _run("numpy", case), export_onnx(main, fetch_list=fetch, include_updates=False)
    if (case.op, str(next(iter(feed.values())).dtype)) in ORT_REFUSES and all(np.size(v) for v in feed.values()):
        with pytest.raises(Exception, match="not supported"):
            run_ort(model, feed)
        return
    got = run_ort(model, feed)
    for name, w in zip(fetch, want):
        if (case.op, case.label) in ORT_DIFFERS:
            assert not np.array_equal(got[name], w), f"{name}: ONNX Runtime now gives numpy's answer"
            continue
        if case.op in ROUNDED:  # summed in another order: to the array's scale, as the engines are compared
            assert_identical([w], [got[name]], name, exact=False)
            continue
        assert_close(got[name], w, name)
        if w.dtype.kind == "f" and case.op not in ORT_ZERO_SIGNS:  # and each zero's sign
            np.testing.assert_array_equal(np.signbit(got[name][w == 0]), np.signbit(w[w == 0]), err_msg=name)
