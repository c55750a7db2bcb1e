"""The ops whose math issue 31 moved beside their schemas (one ``compute`` over ``xp``, each engine's kernel derived
from it): on the edges of each op's domain (float16, float64 and the integers, zero-size dims, NaN and infinities,
signed zeros, broadcasting) every engine gives the numpy engine's answer bit for bit, or refuses where it refuses;
ONNX Runtime runs the export to the executor's answer (``tests/onnx/runtime.assert_close``, zero signs too) or
refuses it too."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, export_onnx
from gradgen.program import OP_SCHEMAS
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import assert_close, require, run_ort

rng = np.random.default_rng(31)
FLOATS = ("float16", "float32", "float64")
INTS = ("int32", "int64")
SPECIAL = np.array([0.5, -0.0, np.inf, 1.5, np.nan, -2.0, -np.inf, 0.0, 3.0, -1.0, 2.0, 0.25])
"""Twelve values with each float edge in it: NaN, both infinities, both zeros."""


def _values(shape, dtype) -> np.ndarray:
    """Random small numbers in ``dtype`` (integers from -6 to 6)."""
    if dtype in INTS:
        return rng.integers(-6, 7, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def cumsum_cases():
    for dtype in FLOATS + INTS:
        x = _values((2, 3, 4), dtype)
        for axis, exclusive, reverse in itertools.product((0, 1, -1), (False, True), (False, True)):
            yield Case("cumsum", {"X": x}, None, {"axis": axis, "exclusive": exclusive, "reverse": reverse},
                       label=f"{dtype},{axis},{exclusive},{reverse}")
        for exclusive, reverse in itertools.product((False, True), repeat=2):
            yield Case("cumsum", {"X": _values((3, 0, 2), dtype)}, None,
                       {"axis": 1, "exclusive": exclusive, "reverse": reverse}, label=f"{dtype},empty axis")
            yield Case("cumsum", {"X": _values((0, 4), dtype)}, None,
                       {"axis": 1, "exclusive": exclusive, "reverse": reverse}, label=f"{dtype},empty rows")
    for dtype in FLOATS:  # NaN and inf carried on; -0.0 first stays -0.0 (0 + -0.0 would be +0.0)
        for exclusive, reverse in itertools.product((False, True), repeat=2):
            yield Case("cumsum", {"X": SPECIAL.reshape(3, 4).astype(dtype)}, None,
                       {"axis": 0, "exclusive": exclusive, "reverse": reverse}, label=f"{dtype},special")
            yield Case("cumsum", {"X": np.array([[-0.0, -0.0, 1.0]], dtype)}, None,
                       {"axis": 1, "exclusive": exclusive, "reverse": reverse}, label=f"{dtype},-0")
    big = np.array([2 ** 31 - 1, 1, -5], np.int32)  # int32 sums wrap in int32, as numpy's with dtype=int32
    yield Case("cumsum", {"X": big}, None, {"axis": 0}, label="int32 wraps")
    yield Case("cumsum", {"X": np.array([2 ** 53, 1, 1], np.int64)}, None, {"axis": 0}, label="int64 past 2**53")


def triangle_cases():
    for op, dtype in itertools.product(("tril", "triu"), FLOATS + INTS + ("bool",)):
        x = _values((2, 3, 4), dtype) if dtype != "bool" else rng.random((2, 3, 4)) > 0.5
        for diagonal in (0, 1, -2, 4, -3, 2 ** 63 - 1, -2 ** 63):
            yield Case(op, {"X": x}, None, {"diagonal": diagonal}, label=f"{dtype},{diagonal}")
        for shape in ((0, 3), (3, 0), (2, 0, 4, 4)):
            yield Case(op, {"X": np.zeros(shape, dtype)}, None, {"diagonal": 1}, label=f"{dtype},empty")
    for op, dtype in itertools.product(("tril", "triu"), FLOATS):  # NaN, inf and -0 kept above or below, or zeroed
        yield Case(op, {"X": SPECIAL.reshape(1, 3, 4).astype(dtype)}, None, {"diagonal": 0}, label=f"{dtype},special")


def mod_cases():
    for fmod in (False, True):
        for dtype in FLOATS + INTS:
            for sx, sy in (((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 4), (4,))):
                y = _values(sy, dtype)
                y[y == 0] = 2  # (a zero divisor: below)
                yield Case("elementwise_mod", {"X": _values(sx, dtype), "Y": y}, None, {"fmod": fmod},
                           label=f"{dtype},{fmod}")
            signs = np.array([[7, -7, 7, -7, 6, -6, 0, 6], [3, 3, -3, -3, 3, 3, -3, -3]], dtype)  # zero results too
            yield Case("elementwise_mod", {"X": signs[0], "Y": signs[1]}, None, {"fmod": fmod}, label=f"{dtype},signs")
        for dtype in FLOATS:  # NaN, inf, signed zeros, and a zero divisor (NaN) on either side
            x, y = np.meshgrid(SPECIAL, SPECIAL)
            yield Case("elementwise_mod", {"X": x.astype(dtype), "Y": y.astype(dtype)}, None, {"fmod": fmod},
                       label=f"{dtype},special")
        for dtype in INTS:
            low = np.iinfo(dtype).min
            yield Case("elementwise_mod", {"X": np.array([low, low, 5], dtype), "Y": np.array([-1, 3, -2], dtype)},
                       None, {"fmod": fmod}, label=f"{dtype},min")
            yield Case("elementwise_mod", {"X": np.array([5, 6], dtype), "Y": np.array([2, 0], dtype)}, None,
                       {"fmod": fmod}, label=f"{dtype},zero divisor")


def pow_cases():
    """Not converted here, but its integer power by a negative exponent is refused through ``xp.check`` as mod's
    zero divisor is (xla and torch computed a wrong number)."""
    for dtype in INTS:
        for y in ([2, 3, 0], [2, -1, 1], [-3]):
            yield Case("elementwise_pow", {"X": np.array([2, 3, 0], dtype), "Y": np.array(y, dtype)}, None,
                       label=f"{dtype},{y}")


def increment_cases():
    for dtype in FLOATS + INTS:
        for shape in ((), (1,)):
            for step in (1.0, -3.0, 0.0):
                yield Case("increment", {"X": np.full(shape, 5, dtype)}, None, {"step": step}, label=f"{dtype},{step}")
    for dtype in FLOATS:
        for value in (np.nan, np.inf, -0.0, 0.5):
            yield Case("increment", {"X": np.array([value], dtype)}, None, {"step": 0.25}, label=f"{dtype},{value}")
    # counts past float64's 2**53 and float32's 2**24 advance exactly; an int32 counter at its top wraps
    yield Case("increment", {"X": np.array(2 ** 53 + 1, np.int64)}, None, {"step": 1.0}, label="past 2**53")
    yield Case("increment", {"X": np.array([2 ** 62 + 7], np.int64)}, None, {"step": -3.0}, label="past 2**62")
    yield Case("increment", {"X": np.array(2 ** 24 + 1, np.int32)}, None, {"step": 1.0}, label="past 2**24")
    yield Case("increment", {"X": np.array(2 ** 31 - 1, np.int32)}, None, {"step": 1.0}, label="int32 top")


def one_hot_cases():
    for ids_dtype, dtype in itertools.product(INTS, FLOATS + INTS + ("bool",)):
        ids = np.array([[0, 3, -1], [4, 2, -7]], ids_dtype)  # -1, -7 and 4 (= depth): rows of zeros
        yield Case("one_hot", {"X": ids}, None, {"depth": 4, "dtype": dtype}, label=f"{dtype}")
        yield Case("one_hot", {"X": np.zeros((0, 2), ids_dtype)}, None, {"depth": 3, "dtype": dtype},
                   label=f"{dtype},empty")
        yield Case("one_hot", {"X": np.array(2, ids_dtype)}, None, {"depth": 3, "dtype": dtype}, label=f"{dtype},0-d")
    # ids as themselves, never as the output's dtype: 2049 is 2048 in float16, 2**32 + 1 is 1 in int32
    yield Case("one_hot", {"X": np.array([2049, 2047], np.int64)}, None, {"depth": 2050, "dtype": "float16"},
               label="past float16's integers")
    yield Case("one_hot", {"X": np.array([2 ** 32 + 1, 1, -2 ** 32], np.int64)}, None, {"depth": 3, "dtype": "int32"},
               label="past int32")
    yield Case("one_hot", {"X": np.array([2 ** 24 + 1], np.int32)}, None, {"depth": 2 ** 24 + 2, "dtype": "float32"},
               label="past 2**24")


def label_cases():
    """The cross-entropies on hard labels read once (``program/ops/nn.hard_labels``): labels as given, never in the
    probabilities' dtype (3001 is 3000 in float16), ``ignore_index`` giving 0, one out of range refused."""
    for op, slot in (("cross_entropy", "X"), ("softmax_with_cross_entropy", "Logits")):
        for dtype, label_dtype in itertools.product(FLOATS, INTS):
            x = rng.random((3, 4001)).astype(dtype) + np.asarray(0.1, dtype)
            x = x / x.sum(-1, keepdims=True) if op == "cross_entropy" else x
            labels = np.array([[3001], [2049], [-100]], label_dtype)
            yield Case(op, {slot: x, "Label": labels}, None, {}, label=f"{dtype},{label_dtype},past 2048")
            yield Case(op, {slot: x, "Label": labels[:, 0]}, None, {}, label=f"{dtype},{label_dtype},no class axis")
            yield Case(op, {slot: x[:, :5], "Label": np.array([[1], [5], [0]], label_dtype)}, None, {},
                       label=f"{dtype},{label_dtype},out of range")
            yield Case(op, {slot: x[:0], "Label": labels[:0]}, None, {}, label=f"{dtype},{label_dtype},empty")


CASES = [*cumsum_cases(), *triangle_cases(), *mod_cases(), *pow_cases(), *increment_cases(), *one_hot_cases(),
         *label_cases()]


def with_fetch(case: Case, build=one_op_program) -> tuple:
    """The case's one-op program (made by ``build``), its feed, and every output's name to fetch."""
    main, op, feed = build(case)
    return main, feed, [n for names in op.outputs.values() for n in names]


def assert_covers(cases, ops) -> None:
    """The cases test exactly ``ops``, and each of them states its math once (a compute)."""
    assert {c.op for c in cases} == set(ops)
    assert all(OP_SCHEMAS[t].compute is not None for t in ops)


def run_case(backend: str, case: Case, build=one_op_program):
    """The case's one-op program (made by ``build``) run on ``backend``: its outputs, or the ExecutionError."""
    main, feed, fetch = with_fetch(case, build)
    try:
        with np.errstate(all="ignore"):
            return Executor(backend=backend).run(main, feed=feed, fetch_list=fetch, scope=Scope())
    except ExecutionError as e:
        return e


_OWN_EXP_LOG = "exp and log are each library's own, a few ulps apart; sums over 4001 classes in another order"
ROUNDED = {"cumsum": "torch sums float16 and float32 along the last axis in a wider type, rounding each sum once; jax "
                     "and torch start a sum at +0.0, so a leading -0.0 gives +0.0 where numpy's gives -0.0",
           "cross_entropy": _OWN_EXP_LOG, "softmax_with_cross_entropy": _OWN_EXP_LOG}
"""Ops whose finite floats an engine may round otherwise (to ``TOLERANCE``), and why; the rest match bit for bit."""

_NO_RANGE_CHECK = "ONNX has no run-time error for a label outside the classes: the export picks by GatherElements"
ORT_ANSWERS = {"elementwise_pow": "ONNX Runtime's Pow gives an integer to a negative power as 0, and ONNX has no "
                                  "run-time error to raise instead",
               "cross_entropy": _NO_RANGE_CHECK, "softmax_with_cross_entropy": _NO_RANGE_CHECK}
"""Ops the engines refuse on some values where their ONNX export runs, and why."""

TOLERANCE = {np.dtype("float16"): 2e-3, np.dtype("float32"): 1e-6, np.dtype("float64"): 1e-15}
"""Relative to the largest finite magnitude of the value compared."""


NAMED_ONLY_EAGERLY = {"cross_entropy", "softmax_with_cross_entropy"}
"""Ops whose refusal names the offending value on the engines that compute eagerly (``xp.check``'s ``detail``):
a tracing engine (xla) gives the check's words, which share the reason from " is outside " on."""


def assert_identical(want, got, what: str, exact: bool = True, brief: bool = False) -> None:
    """The same values bit for bit: dtypes, shapes, NaN where NaN, each zero's sign (or, not ``exact``, the same
    non-finite values and finite ones to ``TOLERANCE``); or both refused, with numpy's reason (``brief``: the
    reason without the value it names, ``NAMED_ONLY_EAGERLY``)."""
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert isinstance(want, Exception) and isinstance(got, Exception), f"{what}: numpy {want!r}, engine {got!r}"
        reason = str(want).split(" failed: ")[-1].split(";")[0]
        if brief:
            reason = "is outside " + reason.split(" is outside ")[1].split(" (")[0]
        assert reason in str(got), f"{what}: numpy {want}, engine {got}"
        return
    for w, g in zip(want, got):
        g = np.asarray(g)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), \
            f"{what}: {g.dtype}{list(g.shape)}, numpy {w.dtype}{list(w.shape)}"
        if w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=what)
        elif exact:
            np.testing.assert_array_equal(g, w, err_msg=what)  # NaN where NaN
            np.testing.assert_array_equal(np.signbit(g[g == 0]), np.signbit(w[w == 0]), err_msg=f"{what}: zero signs")
        else:
            finite = np.isfinite(w)
            np.testing.assert_array_equal(g[~finite], w[~finite], err_msg=f"{what}: non-finite values")
            scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
            np.testing.assert_allclose(g[finite].astype(float), w[finite].astype(float), rtol=0,
                                       atol=TOLERANCE[w.dtype] * scale, err_msg=what)


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    assert_identical(run_case("numpy", case), run_case(backend, case), f"{case.id} on {backend}",
                     case.op not in ROUNDED, brief=backend == "xla" and case.op in NAMED_ONLY_EAGERLY)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    require("onnx")
    main, feed, fetch = with_fetch(case)
    want, model = run_case("numpy", case), export_onnx(main, fetch_list=fetch, include_updates=False)
    if isinstance(want, Exception):  # refused at run time there too, but where ONNX Runtime answers
        if case.op in ORT_ANSWERS:
            run_ort(model, feed)
            return
        with pytest.raises(Exception, match="by zero"):
            run_ort(model, feed)
        return
    got = run_ort(model, feed)
    for name, w in zip(fetch, want):
        assert_close(got[name], w, name)
        if w.dtype.kind == "f" and case.op not in ROUNDED:  # and each zero's sign
            np.testing.assert_array_equal(np.signbit(got[name][w == 0]), np.signbit(w[w == 0]), err_msg=name)


def test_the_inputs_kept_from_the_declared_dtype_are_those_of_integers_only_slots():
    """``derive.uncast_inputs``: one_hot's ids and gather's index, by their position among the op's arrays; no
    operand of arithmetic (which the xla and torch engines compute in the declared dtype)."""
    from gradgen.framework.backend.derive import uncast_inputs

    def positions(case: Case) -> frozenset[int]:
        return uncast_inputs(OP_SCHEMAS[case.op], one_op_program(case)[1])

    ids = np.array([1, 0], np.int64)
    assert positions(Case("one_hot", {"X": ids}, None, {"depth": 2})) == {0}
    assert positions(Case("gather", {"X": np.ones((2, 3)), "Index": ids}, None)) == {1}
    assert positions(Case("elementwise_mod", {"X": ids, "Y": ids}, None)) == frozenset()
