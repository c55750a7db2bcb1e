"""The manipulation ops and the two grad ops (``reshape_as``, ``split_like``) whose math moved beside their schemas
(one ``compute`` over ``xp``, each engine's kernel derived from it): on the edges of each op's domain (float16,
float64, the integers and bool, zero-size and size-1 dims, NaN, infinities and signed zeros, dims declared -1 that
meet at run time) every engine gives the numpy engine's answer bit for bit, or refuses where it refuses; ONNX
Runtime runs the export (each op's own, ``lower_tensor.OWN_EXPORTS``) to the executor's answer."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from gradgen.framework import export_onnx
from gradgen.framework.tools.onnx.errors import OnnxExportError
from gradgen.program import OP_SCHEMAS, Program
from tests.backends.test_stated_once import FLOATS, INTS, SPECIAL, assert_covers, assert_identical, run_case, with_fetch
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.runtime import assert_close, require, run_ort

rng = np.random.default_rng(32)
DTYPES = FLOATS + INTS + ("bool",)


@dataclass
class RunTimeCase(Case):
    """A Case whose input vars declare the dims ``run_time`` as -1 (known only at run time)."""

    run_time: tuple[int, ...] = ()


def _values(shape, dtype) -> np.ndarray:
    """Random small numbers in ``dtype`` (integers from -6 to 6, bools at random)."""
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in INTS:
        return rng.integers(-6, 7, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def _special(shape, dtype) -> np.ndarray:
    """``SPECIAL``'s NaN, infinities and signed zeros, repeated to fill ``shape``."""
    return np.resize(SPECIAL, shape).astype(dtype)


def sum_cases():
    for dtype in FLOATS + INTS:
        for n, shape in itertools.product((1, 2, 3), ((2, 3), (0, 3), (), (1, 1))):
            yield Case("sum", {"X": [_values(shape, dtype) for _ in range(n)]}, None, label=f"{dtype},{n}")
    for dtype in FLOATS:  # inf + -inf is NaN, -0.0 + -0.0 stays -0.0, -0.0 + 0.0 is 0.0
        special = _special(12, dtype)
        yield Case("sum", {"X": [special, special[::-1].copy()]}, None, label=f"{dtype},special")
        yield Case("sum", {"X": [np.array([-0.0, -0.0, 0.0], dtype)] * 3}, None, label=f"{dtype},-0")
    # each sum rounded to float16 before the next is added: 2048 + 1 is 2048, twice (not 2050 from one rounding)
    yield Case("sum", {"X": [np.array([2048.0, 1.0], np.float16), np.array([1.0, 2048.0], np.float16),
                             np.array([1.0, 1.0], np.float16)]}, None, label="float16 rounds each sum")
    yield Case("sum", {"X": [np.array([6e4], np.float16)] * 2}, None, label="float16 overflows")
    yield Case("sum", {"X": [np.array([2 ** 31 - 1], np.int32), np.array([1], np.int32)]}, None, label="int32 wraps")
    ones = [np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)]  # declared [-1, 3] both: refused, not broadcast
    yield RunTimeCase("sum", {"X": ones}, None, label="run-time shapes differ", run_time=(0,))
    yield RunTimeCase("sum", {"X": [ones[0], ones[0]]}, None, label="run-time shapes agree", run_time=(0,))


def reduce_as_cases():
    for dtype in FLOATS + INTS:
        x = _values((2, 3, 4), dtype)
        for target in ((3, 1), (4,), (), (2, 3, 4), (1, 1, 4), (2, 1, 1), (1, 3, 4)):
            yield Case("reduce_as", {"X": x, "Target": np.zeros(target, "bool")}, None, label=f"{dtype},{target}")
        yield Case("reduce_as", {"X": _values((0, 3), dtype), "Target": np.zeros((3,), dtype)}, None,
                   label=f"{dtype},empty lead")
        yield Case("reduce_as", {"X": _values((2, 0), dtype), "Target": np.zeros((1, 0), dtype)}, None,
                   label=f"{dtype},empty")
        yield RunTimeCase("reduce_as", {"X": x[0], "Target": np.zeros((1, 4), dtype)}, None,
                          label=f"{dtype},a dim 1 at run time", run_time=(0,))
    for dtype in FLOATS:  # NaN and inf carried, inf + -inf is NaN
        yield Case("reduce_as", {"X": _special((3, 4), dtype), "Target": np.zeros((4,), dtype)}, None,
                   label=f"{dtype},special")
    big = np.array([[2 ** 31 - 1], [1]], np.int32)  # summed in int32, wrapping, as numpy's with dtype=int32
    yield Case("reduce_as", {"X": big, "Target": np.zeros((1,), np.int32)}, None, label="int32 wraps")


def broadcast_to_cases():
    for dtype in DTYPES:
        x = _values((1, 3), dtype)
        for shape in ((2, 3), (4, 2, 3), (0, 3), (1, 3)):
            yield Case("broadcast_to", {"X": x}, None, {"shape": list(shape)}, label=f"{dtype},{shape}")
            yield Case("broadcast_to", {"X": x, "ShapeLike": np.zeros(shape, "int64")}, None,
                       label=f"{dtype},like {shape}")
        yield Case("broadcast_to", {"X": _values((), dtype)}, None, {"shape": [2, 3]}, label=f"{dtype},0-d")
        yield RunTimeCase("broadcast_to", {"X": x, "ShapeLike": np.zeros((5, 3), "float16")}, None,
                          label=f"{dtype},like's dim at run time", run_time=(0,))
    for dtype in FLOATS:
        yield Case("broadcast_to", {"X": _special((12,), dtype)}, None, {"shape": [2, 12]}, label=f"{dtype},special")


def squeeze_cases():
    for dtype in DTYPES:
        x = _values((1, 3, 1, 2), dtype)
        for axes in ([], [0], [-2], [0, 2], [2, -4]):
            yield Case("squeeze", {"X": x}, None, {"axes": axes}, label=f"{dtype},{axes}")
        yield Case("squeeze", {"X": _values((1, 0, 1), dtype)}, None, {"axes": []}, label=f"{dtype},empty")
        yield Case("squeeze", {"X": _values((1, 1), dtype)}, None, {"axes": []}, label=f"{dtype},to 0-d")
        yield Case("squeeze", {"X": _values((), dtype)}, None, {"axes": []}, label=f"{dtype},0-d")
    x = _values((2, 3), "float32")  # declared [-1, 3]: size 2 at run time, refused; size 1 squeezed
    yield RunTimeCase("squeeze", {"X": x}, None, {"axes": [0]}, label="not 1 at run time", run_time=(0,))
    yield RunTimeCase("squeeze", {"X": x[:1]}, None, {"axes": [0]}, label="1 at run time", run_time=(0,))
    for dtype in FLOATS:
        yield Case("squeeze", {"X": _special((1, 12), dtype)}, None, {"axes": [0]}, label=f"{dtype},special")


def unsqueeze_cases():
    for dtype in DTYPES:
        x = _values((2, 3), dtype)
        for axes in ([0], [-1], [0, 2], [1, 1], [-1, 0]):
            yield Case("unsqueeze", {"X": x}, None, {"axes": axes}, label=f"{dtype},{axes}")
        yield Case("unsqueeze", {"X": _values((), dtype)}, None, {"axes": [0, 0]}, label=f"{dtype},0-d")
        yield Case("unsqueeze", {"X": _values((0, 2), dtype)}, None, {"axes": [1]}, label=f"{dtype},empty")
    yield RunTimeCase("unsqueeze", {"X": _values((4, 3), "int64")}, None, {"axes": [1]}, label="run-time dim",
                      run_time=(0,))
    for dtype in FLOATS:
        yield Case("unsqueeze", {"X": _special((12,), dtype)}, None, {"axes": [0]}, label=f"{dtype},special")


def flatten_cases():
    for dtype in DTYPES:
        x = _values((2, 3, 4), dtype)
        for axis in (0, 1, 2, 3, -1, -3):
            yield Case("flatten", {"X": x}, None, {"axis": axis}, label=f"{dtype},{axis}")
        yield Case("flatten", {"X": _values((2, 0, 3), dtype)}, None, {"axis": 2}, label=f"{dtype},empty")
        yield Case("flatten", {"X": _values((), dtype)}, None, {"axis": 0}, label=f"{dtype},0-d")
    yield RunTimeCase("flatten", {"X": _values((5, 3, 2), "float64")}, None, {"axis": 1}, label="run-time dim",
                      run_time=(0,))
    for dtype in FLOATS:
        yield Case("flatten", {"X": _special((3, 2, 2), dtype)}, None, {"axis": 1}, label=f"{dtype},special")


def stack_cases():
    for dtype in DTYPES:
        for n, shape, axis in itertools.product((1, 2, 3), ((2, 3), (0, 3), ()), (0, -1)):
            yield Case("stack", {"X": [_values(shape, dtype) for _ in range(n)]}, None, {"axis": axis},
                       label=f"{dtype},{n},{axis}")
        yield Case("stack", {"X": [_values((2, 3), dtype)] * 2}, None, {"axis": 1}, label=f"{dtype},middle")
    for dtype in FLOATS:
        yield Case("stack", {"X": [_special(12, dtype), _special(12, dtype)]}, None, {"axis": 1},
                   label=f"{dtype},special")
    ones = [np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)]
    yield RunTimeCase("stack", {"X": ones}, None, {"axis": 0}, label="run-time shapes differ", run_time=(0,))


def split_cases():
    for dtype in DTYPES:
        x = _values((5, 3), dtype)
        for axis, sections in ((0, [2, 3]), (0, [-1, 1]), (0, [5]), (0, [0, 5, 0]), (-1, [1, 2]), (1, [1, -1, 1])):
            yield Case("split", {"X": x}, None, {"axis": axis, "sections": sections},
                       n_outputs={"Out": len(sections)}, label=f"{dtype},{axis},{sections}")
        yield Case("split", {"X": _values((0, 3), dtype)}, None, {"axis": 0, "sections": [0, -1]},
                   n_outputs={"Out": 2}, label=f"{dtype},empty axis")
    x = _values((5, 2), "float32")  # declared [-1, 2]: the -1 section takes the rest, or there is none left
    yield RunTimeCase("split", {"X": x}, None, {"axis": 0, "sections": [2, -1]}, n_outputs={"Out": 2},
                      label="rest at run time", run_time=(0,))
    yield RunTimeCase("split", {"X": x[:1]}, None, {"axis": 0, "sections": [2, -1]}, n_outputs={"Out": 2},
                      label="too short at run time", run_time=(0,))
    yield RunTimeCase("split", {"X": x[:3]}, None, {"axis": 0, "sections": [2, 2]}, n_outputs={"Out": 2},
                      label="sizes off at run time", run_time=(0,))
    for dtype in FLOATS:
        yield Case("split", {"X": _special((12,), dtype)}, None, {"axis": 0, "sections": [5, 7]},
                   n_outputs={"Out": 2}, label=f"{dtype},special")


def pad_cases():
    for dtype in FLOATS + INTS:
        x = _values((2, 3), dtype)
        for paddings, value in (([1, 0, 0, 2], 0.0), ([0, 0, 0, 0], 5.0), ([2, 2, 1, 1], -3.0)):
            yield Case("pad", {"X": x}, None, {"paddings": paddings, "pad_value": value}, label=f"{dtype},{paddings}")
        yield Case("pad", {"X": _values((0, 3), dtype)}, None, {"paddings": [1, 1, 0, 1], "pad_value": 2.0},
                   label=f"{dtype},empty")
        yield Case("pad", {"X": _values((), dtype)}, None, {"paddings": [], "pad_value": 2.0}, label=f"{dtype},0-d")
    for dtype in FLOATS:  # NaN, inf and -0.0 as values, and in X
        for value in (np.nan, np.inf, -0.0):
            yield Case("pad", {"X": _special((3, 4), dtype)}, None, {"paddings": [1, 1, 0, 2], "pad_value": value},
                       label=f"{dtype},{value}")
    # rounded once to float16 (1.0009765625), not through float32 (1.0); an int64 past 2**53 exactly
    yield Case("pad", {"X": np.zeros(2, np.float16)}, None, {"paddings": [1, 1], "pad_value": 1 + 2 ** -11 + 2 ** -40},
               label="float16 rounds once")
    yield Case("pad", {"X": np.zeros(2, np.int64)}, None, {"paddings": [1, 0], "pad_value": float(2 ** 62 + 2 ** 10)},
               label="int64 past 2**53")
    yield RunTimeCase("pad", {"X": _values((4, 2), "int32")}, None, {"paddings": [1, 0, 0, 1], "pad_value": 7.0},
                      label="run-time dim", run_time=(0,))


def reshape_as_cases():
    for dtype in DTYPES:
        x = _values((2, 6), dtype)
        for target in ((3, 4), (12,), (1, 12, 1), (2, 6)):
            yield Case("reshape_as", {"X": x, "Target": np.zeros(target, "float16")}, None, label=f"{dtype},{target}")
        yield Case("reshape_as", {"X": _values((1,), dtype), "Target": np.zeros((), "int32")}, None,
                   label=f"{dtype},to 0-d")
        yield Case("reshape_as", {"X": _values((0, 4), dtype), "Target": np.zeros((2, 0), "bool")}, None,
                   label=f"{dtype},empty")
    yield RunTimeCase("reshape_as", {"X": _values((6, 2), "float32"), "Target": np.zeros((3, 4), "int64")}, None,
                      label="run-time dims", run_time=(0,))
    for dtype in FLOATS:
        yield Case("reshape_as", {"X": _special((12,), dtype), "Target": np.zeros((3, 4), dtype)}, None,
                   label=f"{dtype},special")


def split_like_cases():
    for dtype in DTYPES:
        x = _values((5, 3), dtype)
        for axis, sizes in ((0, (2, 3)), (0, (5,)), (0, (0, 5)), (1, (1, 2)), (-1, (2, 1)), (1, (1, 0, 2))):
            likes = [np.zeros((d, 3) if axis == 0 else (5, d), "int32") for d in sizes]
            yield Case("split_like", {"X": x, "Like": likes}, None, {"axis": axis}, n_outputs={"Out": len(sizes)},
                       label=f"{dtype},{axis},{sizes}")
    yield RunTimeCase("split_like", {"X": _values((5, 2), "float64"),
                                     "Like": [np.zeros((1, 2), "bool"), np.zeros((4, 2), "bool")]}, None,
                      {"axis": 0}, n_outputs={"Out": 2}, label="run-time dims", run_time=(0,))
    for dtype in FLOATS:
        yield Case("split_like", {"X": _special((12,), dtype), "Like": [np.zeros(5), np.zeros(7)]}, None,
                   {"axis": 0}, n_outputs={"Out": 2}, label=f"{dtype},special")


CASES = [*sum_cases(), *reduce_as_cases(), *broadcast_to_cases(), *squeeze_cases(), *unsqueeze_cases(),
         *flatten_cases(), *stack_cases(), *split_cases(), *pad_cases(), *reshape_as_cases(), *split_like_cases()]

ROUNDED = {"reduce_as": "jax and torch sum over several axes in another order than numpy's pairwise sum (and "
                        "float16 in a wider type), so the last bit of a float sum may differ"}
"""Ops whose finite floats an engine may round otherwise (to ``test_stated_once.TOLERANCE``), and why; the rest
match bit for bit."""

ORT_DIFFERS = {("reduce_as", "int32 wraps"): "ONNX Runtime's int32 ReduceSum saturates at 2**31 - 1 where numpy "
                                             "wraps (ONNX leaves integer overflow undefined)"}
"""Cases (by op and label) whose export ONNX Runtime runs to another answer, and why."""

EXPORT_REFUSED = {("split", "rest at run time"): "a -1 section along an axis of unknown size (lower_tensor.LIMITS)"}
"""Cases (by op and label) the exporter refuses, and why."""


def _known(table: dict, case: Case) -> bool:
    """Whether ``table`` lists the case, by its op and the last part of its label."""
    return (case.op, case.label.rsplit(",", 1)[-1]) in table


def _program(case: Case):
    """The case's op alone in a new program, its inputs declaring the case's ``run_time`` dims as -1."""
    run_time = getattr(case, "run_time", ())
    if not run_time:
        return one_op_program(case)
    main = Program()
    block, feed, ins = main.global_block(), {}, {}
    for slot, value in case.inputs.items():
        ins[slot] = []
        for k, v in enumerate(value if isinstance(value, list) else [value]):
            name = f"in_{slot}_{k}"
            block.create_var(name, tuple(-1 if i in run_time else d for i, d in enumerate(v.shape)), v.dtype.name)
            feed[name] = v
            ins[slot].append(name)
    outs = {s.name: [f"out_{s.name}_{k}" for k in range(case.n_outputs.get(s.name, 1))]
            for s in OP_SCHEMAS[case.op].outputs}
    return main, block.append_op(case.op, ins, outs, case.attrs), feed


def _run(backend: str, case: Case):
    return run_case(backend, case, _program)


def test_the_cases_cover_every_op_converted_here():
    converted = {"sum", "reduce_as", "broadcast_to", "squeeze", "unsqueeze", "flatten", "stack", "split", "pad",
                 "reshape_as", "split_like"}
    assert_covers(CASES, converted)


@pytest.mark.parametrize("backend", ["xla", "torch"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_engine_gives_numpys_answer_bit_for_bit(case: Case, backend: str):
    require({"xla": "jax"}.get(backend, backend))
    assert_identical(_run("numpy", case), _run(backend, case), f"{case.id} on {backend}", case.op not in ROUNDED)


def test_the_run_time_refusals_are_numpys():
    """The cases above that the engines must refuse are refused by numpy (not two engines agreeing on an answer)."""
    refused = [c for c in CASES if isinstance(_run("numpy", c), Exception)]
    assert {c.op for c in refused} == {"sum", "squeeze", "stack", "split"}
    assert "not one shape" in str(_run("numpy", refused[0]))


@pytest.mark.parametrize("case", [c for c in CASES if not isinstance(_run("numpy", c), Exception)],
                         ids=lambda c: c.id)
def test_the_onnx_export_runs_to_the_executors_answer(case: Case):
    require("onnx")
    main, feed, fetch = with_fetch(case, _program)
    if _known(EXPORT_REFUSED, case):
        with pytest.raises(OnnxExportError, match="unknown size"):
            export_onnx(main, fetch_list=fetch, include_updates=False)
        return
    want, model = _run("numpy", case), export_onnx(main, fetch_list=fetch, include_updates=False)
    got = run_ort(model, feed)
    for name, w in zip(fetch, want):
        if _known(ORT_DIFFERS, case):
            assert not np.array_equal(got[name], w), f"{name}: ONNX Runtime now gives numpy's answer"
            continue
        assert_close(got[name], w, name)
        if w.dtype.kind == "f":  # and each zero's sign
            np.testing.assert_array_equal(np.signbit(got[name][w == 0]), np.signbit(w[w == 0]), err_msg=name)


def test_one_piece_of_a_split_is_an_array_and_several_are_a_tuple():
    """``derive.call_of``: a duplicable output slot's list is the op's outputs, one array alone where there is one
    var (an array of one more dim, had the list been taken for the array)."""
    from gradgen.framework.backend.numpy.kernels import KERNELS

    x = np.arange(6.0).reshape(2, 3)
    for sections, want in (([2], x), ([1, 1], (x[:1], x[1:]))):
        case = Case("split", {"X": x}, None, {"axis": 0, "sections": sections}, n_outputs={"Out": len(sections)})
        got = KERNELS["split"](one_op_program(case)[1])(x)
        assert type(got) is type(want) and np.array_equal(np.asarray(got), np.asarray(want)), (sections, got)
