"""The creation family stated once (``program/ops/creation.py``): fill_constant, fill_any_like, fill_zeros_like,
assign and cast, each one ``compute`` over ``xp`` that every engine derives its kernel from. On the edges of each
op's domain (every dtype; fill values at the ends of a dtype's range and values float16 rounds; NaN, infinities
and -0.0; 0-d, zero-size and -1 dims met at run time; casts of NaN, inf and out-of-range floats to integers, of
float64 to float16 at a float32 tie and past float16's range) every engine gives the numpy engine's answer bit for
bit, and ONNX Runtime runs the export to the executor's answer. A fill value a dtype cannot hold is refused when
the op is built, on every engine alike."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, export_onnx
from gradgen.program import OP_SCHEMAS, Program
from tests.backends.test_stated_once import assert_identical, run_case
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import require, run_ort

OPS = ("fill_constant", "fill_any_like", "fill_zeros_like", "assign", "cast")
DTYPES = ("float16", "float32", "float64", "int32", "int64", "bool")
FLOATS = DTYPES[:3]
NAN, INF = float("nan"), float("inf")

FILL_VALUES = {
    "float16": [0.0, -0.0, 1.5, 65504.0, -65504.0, 1 + 2 ** -11 + 2 ** -40, 2 ** -25 + 2 ** -60, 1e-8, 0.1, NAN, INF,
                -INF],
    "float32": [-0.0, 3.4028234663852886e38, -1e-45, 0.1, 2 ** 24 + 1, NAN, -INF],
    "float64": [-0.0, 1.7976931348623157e308, 5e-324, 0.1, NAN, INF],
    "int32": [0, -1, 2 ** 31 - 1, -2 ** 31, 7.0],
    "int64": [2 ** 62 + 1, -2 ** 63, 2 ** 63 - 1, 2 ** 53 + 1, -3.0],
    "bool": [True, False, 1, 0],
}
"""Values each dtype holds (exactly, or rounded once as every float is): its ends, ties and halfway points of
float16, 2**53 + 1 past float64's integers, the special floats."""

CAST_FLOATS = np.array([NAN, INF, -INF, 3e9, -3e9, 1e20, -1e20, 2.7, -2.7, -0.0, 0.0, 300.0, -129.0, 65519.99999,
                        65520.0, 1e10, 2.0 ** 63, -2.0 ** 63, 2.0 ** 31, -2.0 ** 31, -2.0 ** 31 - 0.5, 1e-300, -1e-300,
                        1 + 2 ** -11 + 2 ** -40, 2 ** -25 + 2 ** -60, -2 ** -25 - 2 ** -60, 3e-6])
"""Floats no integer holds (NaN, inf, past 2**31 and 2**63), halves that truncate, and float64s a float16 cast rounds
wrong through float32 (65519.99999 and 1 + 2**-11 + 2**-40 meet a tie there)."""
_NEAR = np.array([0.0, 2 ** -40, -2 ** -40, 2 ** -12, 2 ** -11, 2 ** -11 + 2 ** -40, 2 ** -11 - 2 ** -40, 0.5, 0.75])
HALF_SWEEP = np.concatenate([s * 2.0 ** k * (1 + _NEAR) for s in (1, -1) for k in range(-26, 17)])
"""float64s beside each power of two float16 meets and its ties (relative offsets of 2**-11, the half spacing),
subnormals to past the largest finite: where a cast to float16 rounds wrong twice, or finds e one off."""
CAST_INTS = np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 65519, 65520, 2 ** 24 + 1], np.int64)
CAST_INT64S = np.array([2 ** 53 + 2 ** 29 + 1, 2 ** 62 + 1, -2 ** 63, 2 ** 63 - 1], np.int64)
"""int64s a float32 cast rounds wrong through float64 (the first) and that wrap in int32."""

def _cast_values(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([True, False, True])
    if dtype in FLOATS:
        with np.errstate(all="ignore"):
            return CAST_FLOATS.astype(dtype)
    return np.concatenate([CAST_INTS, CAST_INT64S]).astype(dtype) if dtype == "int64" else CAST_INTS.astype(dtype)


def _x(shape, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(sum(shape) + len(dtype))
    if dtype == "bool":
        return rng.random(shape) > 0.5
    return (rng.standard_normal(shape) * 5).astype(dtype)


def fill_constant_cases():
    for dtype, values in FILL_VALUES.items():
        for value in values:
            yield Case("fill_constant", {}, None, {"shape": [2, 3], "dtype": dtype, "value": value},
                       label=f"{dtype},{value!r}")
        for shape in ([], [0], [2, 0, 3], [70]):  # [70]: past the 64 elements the numpy kernel copies
            yield Case("fill_constant", {}, None, {"shape": shape, "dtype": dtype, "value": values[-1]},
                       label=f"{dtype},{shape}")


def fill_like_cases():
    for x_dtype, dtype in itertools.product(DTYPES, ("",) + DTYPES):
        out = dtype or x_dtype
        for shape in ((), (2, 0, 3), (2, 3)):
            x = _x(shape, x_dtype)
            yield Case("fill_zeros_like", {"X": x}, None, {"dtype": dtype}, label=f"to {out}")
            for value in FILL_VALUES[out][:3] + FILL_VALUES[out][-1:]:
                yield Case("fill_any_like", {"X": x}, None, {"value": value, "dtype": dtype},
                           label=f"to {out},{value!r}")


def assign_cases():
    for dtype in DTYPES:
        for shape in ((), (0, 3), (3, 9)):
            yield Case("assign", {"X": _x(shape, dtype)}, None, label=dtype)
        if dtype in FLOATS:
            yield Case("assign", {"X": _cast_values(dtype)}, None, label=f"{dtype},special")


def cast_cases():
    for src, dst in itertools.product(DTYPES, DTYPES):
        yield Case("cast", {"X": _cast_values(src)}, None, {"out_dtype": dst}, label=f"{src}->{dst}")
        yield Case("cast", {"X": _cast_values(src)[:1].reshape(())}, None, {"out_dtype": dst}, label=f"{src}->{dst},0-d")
        yield Case("cast", {"X": np.zeros((0, 3), src)}, None, {"out_dtype": dst}, label=f"{src}->{dst},empty")


def half_sweep_cases():
    yield Case("cast", {"X": HALF_SWEEP}, None, {"out_dtype": "float16"}, label="float64->float16 sweep")


CASES = [*half_sweep_cases(), *fill_constant_cases(), *fill_like_cases(), *assign_cases(), *cast_cases()]


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    assert_identical(run_case("numpy", case), run_case(backend, case), f"{case.id} on {backend}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    require("onnx")
    main, op, feed = one_op_program(case)
    (out,) = op.output("Out")
    want = run_case("numpy", case)
    got = run_ort(export_onnx(main, fetch_list=[out], include_updates=False), feed)[out]
    assert_identical(want, [got], f"{case.id} in ONNX Runtime")


def _like_program(op_type: str, dtype: str, attrs: dict):
    """``op_type`` of an X declared [-1, 3]: its rows are met only at run time."""
    main = Program()
    block = main.global_block()
    block.create_var("x", (-1, 3), dtype)
    block.append_op(op_type, {"X": ["x"]}, {"Out": ["out"]}, attrs)
    return main


@pytest.mark.parametrize("op_type, attrs", [("fill_any_like", {"value": -0.0}), ("fill_zeros_like", {}),
                                            ("fill_any_like", {"value": 2 ** 62 + 1, "dtype": "int64"}),
                                            ("assign", {}), ("cast", {"out_dtype": "int32"})])
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_run_time_rows_give_numpys_answer_on_every_engine_and_in_onnx(op_type: str, attrs: dict, rows: int):
    main, x = _like_program(op_type, "float32", attrs), _x((rows, 3), "float32")
    answers = {b: Executor(backend=b).run(main, feed={"x": x}, fetch_list=["out"], scope=Scope())
               for b in ("numpy", "xla", "torch")}
    for backend in ("xla", "torch"):
        assert_identical(answers["numpy"], answers[backend], f"{op_type} of [{rows}, 3] on {backend}")
    require("onnx")
    got = run_ort(export_onnx(main, fetch_list=["out"], include_updates=False), {"x": x})["out"]
    assert_identical(answers["numpy"], [got], f"{op_type} of [{rows}, 3] in ONNX Runtime")


@pytest.mark.parametrize("dtype, value, reason", [
    ("float16", 65520.0, "beyond the largest finite float16"), ("float32", 1e39, "beyond the largest finite float32"),
    ("int32", 2 ** 31, "outside the range of int32"), ("int64", 2 ** 63, "outside the range of int64"),
    ("int32", 2.5, "not a whole number"), ("int64", NAN, "not a whole number"), ("bool", 2, "outside the range")])
@pytest.mark.parametrize("op_type", ["fill_constant", "fill_any_like"])
def test_a_fill_value_the_dtype_cannot_hold_is_refused_when_built(op_type: str, dtype: str, value, reason: str):
    block = Program().global_block()
    if op_type == "fill_constant":
        ins, attrs = {}, {"shape": [2], "dtype": dtype, "value": value}
    else:
        block.create_var("x", (2,), "float32")
        ins, attrs = {"X": ["x"]}, {"dtype": dtype, "value": value}
    with pytest.raises(Exception, match=reason):
        block.append_op(op_type, ins, {"Out": ["out"]}, attrs)


@pytest.mark.parametrize("backend", ["numpy", "xla", "torch"])
def test_assigns_value_is_the_runs_own(backend: str):
    """assign's compute hands X on (kernels never write their inputs); the executor's commit and fetch copy, so
    writing the fed array afterwards changes neither the persistable var nor the fetched value."""
    main = Program()
    block = main.global_block()
    block.create_var("x", (3,), "float32")
    block.create_var("y", (3,), "float32", persistable=True)
    block.append_op("assign", {"X": ["x"]}, {"Out": ["y"]})
    x, scope = np.ones(3, np.float32), Scope()
    (fetched,) = Executor(backend=backend).run(main, feed={"x": x}, fetch_list=["y"], scope=scope)
    x[:] = 7
    np.testing.assert_array_equal(scope["y"], np.ones(3))
    np.testing.assert_array_equal(fetched, np.ones(3))


@pytest.mark.parametrize("case", [c for c in CASES if c.op in ("cast", "fill_constant")], ids=lambda c: c.id)
def test_the_numpy_engines_faster_kernels_give_the_computes_numbers(case: Case):
    """numpy's cast and fill_constant stay hand-written where they measured faster (``kernels.FASTER``): the same
    bits as the compute (on x86, where numpy's conversion of a float no integer holds is the most negative one)."""
    from gradgen.framework.backend.numpy.kernels import FASTER, KERNELS, XP
    from gradgen.framework.backend.numpy.kernels.derived import derived_kernel

    assert case.op in FASTER
    _, op, feed = one_op_program(case)
    arrays = [feed[n] for n in op.input_arg_names]
    with np.errstate(all="ignore"):
        got, want = KERNELS[case.op](op)(*arrays), derived_kernel(OP_SCHEMAS[case.op], XP)(op)(*arrays)
    assert_identical([want], [got], case.id)


def test_no_engine_writes_these_ops_by_hand_but_numpys_measured_ones():
    from gradgen.framework.backend.numpy.kernels import FASTER, creation as numpy_creation
    from gradgen.framework.backend.torch.kernels import creation as torch_creation
    from gradgen.framework.backend.xla.lowerings import creation as xla_creation
    from gradgen.framework.tools.onnx import lower_math

    assert all(OP_SCHEMAS[t].compute is not None for t in OPS)
    assert not set(OPS) & (set(torch_creation.KERNELS) | set(xla_creation.LOWERINGS))
    assert set(OPS) & set(numpy_creation.KERNELS) == {"cast", "fill_constant"} <= set(FASTER)
    assert set(OPS) & set(lower_math.LOWERINGS) == {"cast"} <= set(lower_math.OWN_EXPORTS)


def test_cast_and_the_like_fills_take_their_inputs_as_given():
    """``derive.uncast_inputs``: no engine casts cast's X to the declared dtype first (float64 cast to float16
    through float32 rounds twice), nor a fill's X, whose shape alone it reads; assign's needs no cast."""
    from gradgen.framework.backend.derive import uncast_inputs

    x = np.ones(2)
    for op_type, attrs in [("cast", {"out_dtype": "float16"}), ("fill_any_like", {"dtype": "int32"}),
                           ("fill_zeros_like", {})]:
        assert uncast_inputs(OP_SCHEMAS[op_type], one_op_program(Case(op_type, {"X": x}, None, attrs))[1]) == {0}
    assert uncast_inputs(OP_SCHEMAS["assign"], one_op_program(Case("assign", {"X": x}, None))[1]) == frozenset()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_export_imports_back_to_the_same_answer(case: Case):
    """The export's nodes are ones the importer reads (float64 to float16's rounding included), and the program
    it makes gives the executor's answer."""
    from tests.onnx.test_round_trip_every_export import round_trip

    main, op, feed = one_op_program(case)
    round_trip(main, op.output("Out"), feed, Scope(), include_updates=False, what=case.id)
