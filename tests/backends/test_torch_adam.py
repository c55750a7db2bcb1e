"""adam and adamw on the torch engine's ATen passes (``program.ops.optimizer.adam_aten``) against the numpy
reference: plain values, NaN and infinities in every state, bias corrections that divide by zero, betas at and
past the ends of [0, 1], magnitudes across the whole float range; and the kernel takes the ATen passes (bit for
bit theirs) wherever its values allow, and the compute where the betas leave [0, 1]."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_torch_backend import need_torch
from tests.backends.test_torch_fast_paths import _same_as_numpy
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(5)

SHAPES = [(5, 3), (1,), (4, 3, 2), (0, 3)]


def _inputs(shape: tuple, dtype: str, scale: float = 1.0) -> dict:
    draw = lambda: (rng.standard_normal(shape) * scale).astype(dtype)  # noqa: E731
    return {"Param": draw(), "Grad": draw(), "LearningRate": np.array([1e-3], dtype), "Moment1": draw(),
            "Moment2": np.abs(draw()), "Beta1Pow": np.array([0.9 ** 3], dtype),
            "Beta2Pow": np.array([0.999 ** 3], dtype)}


def _case(op_type: str, inputs: dict, label: str, **attrs) -> Case:
    if op_type == "adamw":
        attrs.setdefault("coeff", 0.01)
    return Case(op_type, inputs, None, attrs, label=label)


@pytest.mark.parametrize("op_type", ["adam", "adamw"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("trouble", [None, "Param nan", "Grad inf", "Grad -inf", "Moment1 -inf", "Moment2 inf",
                                     "Moment2 nan", "Beta1Pow 1", "LearningRate inf"])
def test_adam_on_aten_equals_numpys(op_type, dtype, shape, trouble):
    need_torch()
    inputs = _inputs(shape, dtype)
    if trouble is not None:
        slot, value = trouble.split()
        spoiled = inputs[slot].copy()
        if spoiled.size:
            spoiled.reshape(-1)[spoiled.size // 2] = float(value)
        inputs[slot] = spoiled
    _same_as_numpy(_case(op_type, inputs, f"{dtype} {shape} {trouble}"))


@pytest.mark.parametrize("betas", [(0.0, 0.0), (1.0, 1.0), (0.5, 0.9), (1.5, 0.999), (0.9, -0.5)],
                         ids=["zeros", "ones", "inside", "beta1 past 1", "beta2 below 0"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_with_betas_at_and_past_the_ends_equals_numpys(betas, dtype):
    need_torch()
    beta1, beta2 = betas
    _same_as_numpy(_case("adam", _inputs((6, 4), dtype), f"{dtype} {betas}", beta1=beta1, beta2=beta2))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_over_the_whole_float_range_has_numpys_special_values(dtype):
    """Random states from the tiniest to the largest magnitudes of the dtype, with NaN, infinities, signed
    zeros and values near overflow scattered in (negative second moments too), random learning rates, beta powers
    and betas in [0, 1]: the ATen passes give NaN and infinities exactly where the reference does, finite values
    to rounding."""
    need_torch()
    top = 38 if dtype == "float32" else 300
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e38, 1e-38, 1e-45, 2e19]
    for k in range(25):
        inputs = _inputs((64,), dtype, scale=10.0 ** int(rng.integers(-top, top)))
        for slot in ("Param", "Grad", "Moment1", "Moment2"):
            where = rng.integers(0, 64, 6)
            inputs[slot][where] = np.array(rng.choice(specials, 6)).astype(dtype)
        if k % 5:  # (a fifth of the draws keep negative second moments, which no Adam run makes)
            inputs["Moment2"] = np.abs(inputs["Moment2"])
        inputs["LearningRate"] = np.array([rng.choice([1e-3, 0.0, 1.0, 1e30])], dtype)
        inputs["Beta1Pow"] = np.array([rng.choice([0.9, 0.5, 1e-3, 0.0, 1.0])], dtype)
        inputs["Beta2Pow"] = np.array([rng.choice([0.999, 0.5, 0.0])], dtype)
        attrs = {"beta1": float(rng.choice([0.9, 0.0, 0.5, 1.0])), "beta2": float(rng.choice([0.999, 0.0, 0.9])),
                 "epsilon": float(rng.choice([1e-8, 0.0, 1e-3]))}
        with np.errstate(all="ignore"):
            _same_as_numpy(_case("adamw" if k % 2 else "adam", inputs, f"{dtype} draw {k}", **attrs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_kernel_takes_the_aten_passes_and_the_compute_past_the_betas_ends(dtype):
    """The tests above would pass with no ATen passes at all: here the kernel gives ``adam_aten``'s numbers bit
    for bit, on plain values and on a NaN alike (no finiteness check stands it aside), where those differ from the
    compute's somewhere (a fused multiply-add's rounding); with beta1 past 1 it gives the compute's."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import KERNELS, XP
    from gradgen.framework.backend.torch.kernels.derived import computed_kernel
    from gradgen.program import OP_SCHEMAS
    from gradgen.program.ops.optimizer import adam_aten

    def outputs(inputs: dict, attrs: dict):
        _, op, feed = one_op_program(_case("adam", inputs, "", **attrs))
        arrays = [torch.from_numpy(feed[op.input(s.name)[0]]) for s in OP_SCHEMAS["adam"].inputs]
        full = {**{name: a.default for name, a in OP_SCHEMAS["adam"].attrs.items()}, **attrs}
        return (KERNELS["adam"](op)(*arrays), computed_kernel(OP_SCHEMAS["adam"], XP)(op)(*arrays),
                adam_aten(torch.ops.aten, *arrays, **full))

    def equal(a, b) -> bool:
        return all(torch.equal(x.nan_to_num(), y.nan_to_num()) and torch.equal(x.isnan(), y.isnan())
                   for x, y in zip(a, b))

    plain = _inputs((64, 32), dtype)
    got, computed, by_aten = outputs(plain, {})
    assert equal(got, by_aten) and not equal(computed, by_aten)
    spoiled = {**plain, "Grad": plain["Grad"].copy()}
    spoiled["Grad"][0, 0] = np.nan
    got, computed, by_aten = outputs(spoiled, {})
    assert equal(got, by_aten) and got[0].isnan().any()
    got, computed, by_aten = outputs(plain, {"beta1": 1.5})
    assert by_aten is None and equal(got, computed)
