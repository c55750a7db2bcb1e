"""Every op type of one or two float inputs (and no required attrs) on the torch engine, against the numpy
reference, with one value near an end of the float range among 63 ordinary ones: their sum stays finite, so the
engine's finiteness checks let ATen's fast paths run, and the tensor is long enough for ATen's vector kernels
(which round otherwise than its scalar ones); NaN, the infinities and -0 too; and integers at the ends of their
range. Such a sweep found ATen's float32 gelu, torch's remainder, ATen's running products and its batch norm
gradient parting from the reference there (``design_docs/numerics.md``)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.schema import REQUIRED
from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.test_torch_fast_paths import _same_as_numpy
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(17)

REORDERED: set[str] = set()
"""Products whose order of multiplication decides whether a value near the largest float overflows, where the
torch engine multiplies in another order than the reference (``numerics.md``, *What is not held yet*): none since
its float products (``reduce_prod``, and ``prod_others``' running ones) are numpy's."""


def _swept_types() -> list[str]:
    found = []
    for op_type, schema in sorted(OP_SCHEMAS.items()):
        required = [slot for slot in schema.inputs if not slot.optional]
        if (1 <= len(required) <= 2 and not any(slot.duplicable for slot in schema.inputs)
                and not any(attr.default is REQUIRED for attr in schema.attrs.values()) and op_type not in REORDERED):
            found.append(op_type)
    return found


def _extremes(dtype: str) -> list[float]:
    most = float(np.finfo(dtype).max)
    return [most, -most, most / 2, -most / 2, 1e19, float(np.finfo(dtype).tiny), -700.0, 88.0,
            float("nan"), float("inf"), float("-inf"), -0.0]


@pytest.mark.parametrize("op_type", _swept_types())
def test_an_extreme_value_among_ordinary_ones_gives_the_references_numbers(op_type):
    need_torch()
    from gradgen.framework.backend.torch import KERNELS

    if op_type not in KERNELS:
        return  # refused whole by the engine, named (tests/backends/test_torch_backend.py)
    slots = [slot.name for slot in OP_SCHEMAS[op_type].inputs if not slot.optional]
    rng = np.random.default_rng(sum(map(ord, op_type)))
    compared = 0
    for dtype in ("float32", "float64"):
        for extreme in _extremes(dtype):
            spoiled = rng.standard_normal((4, 16)).astype(dtype)
            spoiled[1, 3] = extreme
            plain = rng.standard_normal((4, 16)).astype(dtype)
            for arrays in ([spoiled],) if len(slots) == 1 else ([spoiled, plain], [plain, spoiled]):
                try:
                    main, op, feed = one_op_program(Case(op_type, dict(zip(slots, arrays)), None, {}))
                except Exception:  # the op takes other shapes or dtypes (an index, a label): not this sweep's
                    return
                fetch = [n for names in op.outputs.values() for n in names]
                want = run_on("numpy", main, feed, fetch)
                if isinstance(want, Exception):
                    continue
                assert_same(want, run_on("torch", main, feed, fetch), fetch, f"{op_type} {dtype} {extreme}")
                compared += 1
    assert compared or op_type in ("increment",), op_type


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fraction", [0.49, 0.51, 0.75, 1.0])
def test_gelu_over_half_the_largest_float_equals_numpys(dtype, fraction):
    """ATen's float32 gelu kernel over a vector's lanes forms x (1 + erf(x / sqrt 2)) before halving: inf for x over
    half the largest float, where the compute's x Phi(x) is x. One such value among ordinary ones (their sum
    finite, so the finiteness check lets ATen's call run), in a tensor long enough for the vector kernel: the
    reference's numbers, and its gradient's."""
    need_torch()
    x = rng.standard_normal((4, 64)).astype(dtype)
    x[1, 37] = np.finfo(dtype).max * fraction
    _same_as_numpy(Case("gelu", {"X": x}, None, label=f"{dtype} {fraction}"))
    _same_as_numpy(Case("gelu_grad", {"X": x, "Out@GRAD": rng.standard_normal((4, 64)).astype(dtype)}, None,
                        label=f"{dtype} {fraction}"))


def _ends(dtype: str) -> list[float]:
    most = float(np.finfo(dtype).max)
    return [most, -most, most / 2, -most / 2, most / 1.5, most / 3, most / 8, most / 100, float(np.finfo(dtype).tiny),
            -float(np.finfo(dtype).tiny), 700.0, -700.0, 88.0, -88.0, 1e-30]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("at", range(15))
def test_every_aten_fast_path_meets_one_extreme_value_as_numpy_does(dtype, at):
    """One value near an end of the float range (``_ends``) among 63 ordinary ones: their sum stays finite, so the
    finiteness checks let ATen's calls run, and the tensor is long enough for ATen's vector kernels (a short one
    runs the scalar kernel, which rounds otherwise: gelu's float32 vector kernel overflowed over half the largest
    float, its scalar kernel did not). Every fast path (the ops of one ATen call, softmax, relu's gradient, layer
    norm) against the reference, the value in X and in the output gradient."""
    need_torch()
    extreme = _ends(dtype)[at]
    spoiled = rng.standard_normal((4, 16)).astype(dtype)
    spoiled[1, 3] = extreme
    plain = rng.standard_normal((4, 16)).astype(dtype)
    norm = {"begin_norm_axis": 1, "epsilon": 1e-5}
    cases = [Case("gelu", {"X": spoiled}, None), Case("gelu_grad", {"X": spoiled, "Out@GRAD": plain}, None),
             Case("gelu_grad", {"X": plain, "Out@GRAD": spoiled}, None), Case("sigmoid", {"X": spoiled}, None),
             Case("silu", {"X": spoiled}, None), Case("leaky_relu", {"X": spoiled}, None, {"alpha": 0.2}),
             Case("leaky_relu_grad", {"X": spoiled, "Out@GRAD": plain}, None, {"alpha": 0.2}),
             Case("leaky_relu_grad", {"X": plain, "Out@GRAD": spoiled}, None, {"alpha": 0.2}),
             Case("softmax", {"X": spoiled}, None, {"axis": -1}),
             Case("softmax_grad", {"Out": np.abs(plain) / 10, "Out@GRAD": spoiled}, None, {"axis": -1}),
             Case("relu_grad", {"Out": np.maximum(spoiled, 0), "Out@GRAD": plain}, None),
             Case("relu_grad", {"Out": np.maximum(plain, 0), "Out@GRAD": spoiled}, None),
             Case("layer_norm", {"X": spoiled}, None, norm), Case("layer_norm_grad", {"X": plain, "Y@GRAD": spoiled},
                                                                  None, norm)]
    for case in cases:
        _same_as_numpy(Case(case.op, case.inputs, None, case.attrs, label=f"{dtype} {extreme}"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("at", range(15))
def test_remainders_and_running_products_meet_one_extreme_value_as_numpy_does(dtype, at):
    """The torch engine's ``xp``: torch's vector remainder and fmod gave NaN where X / Y overflows (a float32 X of
    3.4e38 over 0.37), and its running sums and products accumulate float32 in float64, so a running product that
    overflows and comes back in range was finite again (reduce_prod's gradient, ``prod_others``). One extreme
    value among 63 ordinary ones, against the reference."""
    need_torch()
    extreme = _ends(dtype)[at]
    spoiled = rng.standard_normal((4, 16)).astype(dtype)
    spoiled[1, 3] = extreme
    plain = rng.standard_normal((4, 16)).astype(dtype)
    positive = np.abs(plain) + np.asarray(0.1, dtype)
    cases = [Case("elementwise_mod", {"X": spoiled, "Y": positive}, None, {"fmod": fmod}) for fmod in (False, True)]
    cases += [Case("elementwise_mod", {"X": plain, "Y": spoiled}, None, {"fmod": False}),
              Case("prod_others", {"X": spoiled}, None, {"dim": [1]}),
              Case("cumsum", {"X": spoiled}, None, {"axis": -1}), Case("cumsum", {"X": spoiled}, None, {"axis": 0}),
              Case("reduce_prod", {"X": spoiled / 2}, None, {"dim": [1]})]
    for case in cases:
        _same_as_numpy(Case(case.op, case.inputs, None, case.attrs, label=f"{dtype} {extreme}"))


def _integer_types() -> list[str]:
    """The op types of one or two inputs (no required attrs) whose case builds with int32 inputs."""
    found = []
    for op_type in _swept_types() + sorted(REORDERED):
        slots = [slot.name for slot in OP_SCHEMAS[op_type].inputs if not slot.optional]
        ints = np.arange(64, dtype="int32").reshape(4, 16)
        try:
            one_op_program(Case(op_type, dict(zip(slots, [ints] * len(slots))), None, {}))
        except Exception:  # floats only, bools, indices of other shapes: not this sweep's
            continue
        found.append(op_type)
    return found


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integers_at_the_ends_of_their_range_give_the_references_numbers(dtype):
    """Every op type of one or two inputs that takes integers, on values at the ends of the dtype's range, 0, +-1,
    and 46341 (whose square overflows int32), mixed with each other and with small ones: wrap-around, integer
    division and remainder (by zero: the same error), comparisons, sorts and reductions as the reference computes
    them. (The mean of such int64 values is left out: its float64 sum rounds by the order of its additions.)"""
    need_torch()
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    values = np.array([low, high, low + 1, high - 1, 0, -1, 1, 2, -2, 7, -7, high // 2, low // 2, 3, -3, 46341], dtype)
    draw = np.random.default_rng(5)
    compared = 0
    for op_type in _integer_types():
        if dtype == "int64" and op_type in ("mean", "reduce_mean"):
            continue
        slots = [slot.name for slot in OP_SCHEMAS[op_type].inputs if not slot.optional]
        ends = [draw.permutation(np.resize(values, 64)).reshape(4, 16) for _ in slots]
        small = draw.integers(-5, 6, (4, 16)).astype(dtype)
        for arrays in ([ends[0]],) if len(slots) == 1 else (ends, [ends[0], small], [small, ends[0]]):
            main, op, feed = one_op_program(Case(op_type, dict(zip(slots, arrays)), None, {}))
            fetch = [n for names in op.outputs.values() for n in names]
            assert_same(run_on("numpy", main, feed, fetch), run_on("torch", main, feed, fetch), fetch,
                        f"{op_type} {dtype}")
            compared += 1
    assert compared > 60, compared



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("equation, shapes", [("ij,jk,kl->il", [(2, 3), (3, 1), (4, 2)]),
                                              ("ij,jk,kl->", [(2, 3), (3, 4), (4, 2)]),
                                              ("bij,bjk,bkl->bil", [(2, 2, 3), (2, 3, 4), (2, 4, 2)])])
def test_an_einsum_of_three_operands_contracts_in_the_references_order(dtype, equation, shapes):
    """The order of contraction groups the products: with a value near the largest float in one operand, one
    grouping overflows to inf and another meets inf - inf (``ij,jk,kl->il``, k broadcast from 1 to 4: inf on
    numpy, NaN in torch's own order). Three float operands take the reference's order on the torch engine."""
    need_torch()
    draw = np.random.default_rng(len(equation))
    most = float(np.finfo(dtype).max)
    for value in (most, -most, most / 2):
        for spoiled, shape in enumerate(shapes):
            for at in range(int(np.prod(shape))):
                operands = [draw.standard_normal(s).astype(dtype) for s in shapes]
                operands[spoiled].flat[at] = value
                _same_as_numpy(Case("einsum", {"Operands": operands}, None, {"equation": equation},
                                    label=f"{equation} {dtype} {value} at {spoiled}.{at}"))


NUMBERS = [0, -1, 0.1, -0.0, 1e-8, 1e-45, 16777217, 65504, 65519, 3.4028235e38, 1e300, 2 ** 61, 2 ** 70,
           float("nan"), float("inf"), float("-inf")]
"""Numbers a compute may clamp at: ordinary, rounding in float16 or float32, past a dtype's range or int64's, and
the special values."""


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_a_maximum_or_minimum_with_a_number_is_numpys_bit_for_bit(dtype, name):
    """The torch engine's ``xp.maximum(x, number)`` (relu's compute) clamps where the number fits torch's
    conversion and compares a tensor of it elsewhere; either way numpy 2's value (the number rounded to X's dtype
    first), the number on either side, NaN and the infinities in X too."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.xp import XP

    most = float(np.finfo(dtype).max)
    x = np.array([np.nan, -np.inf, np.inf, -1.5, -0.0, 0.0, 0.1, 0.09997, 2.0, most, -most, 1e-40, 5e-324],
                 dtype=dtype)
    for number in NUMBERS:
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(x, number)
        for got in (getattr(XP, name)(torch.from_numpy(x.copy()), number),
                    getattr(XP, name)(number, torch.from_numpy(x.copy()))):
            assert got.numpy().dtype == expected.dtype, (number, got.dtype)
            np.testing.assert_array_equal(got.numpy(), expected, err_msg=f"{name}({dtype}, {number!r})")
