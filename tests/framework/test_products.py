"""The matmul kernel: folded ``x[..., k] @ y[k, n]`` (one 2-D product) and batched products, on strided views and
broadcast batch dims, against numpy's einsum."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy.kernels import KERNELS
from tests.framework.op_harness import Case, one_op_program

_rng = np.random.default_rng(11)


def _kernel(x, y, tx=False, ty=False):
    """The matmul kernel built for operands declared with the shapes and dtypes of ``x`` and ``y``."""
    _, op, _ = one_op_program(Case("matmul", {"X": x, "Y": y}, None, {"transpose_x": tx, "transpose_y": ty}))
    return KERNELS["matmul"](op)


def _want(x, y, tx, ty):
    x = np.swapaxes(x, -1, -2) if tx else x
    y = np.swapaxes(y, -1, -2) if ty else y
    return np.einsum("...ij,...jk->...ik", x.astype(np.float64), y.astype(np.float64))


def _view(shape, dtype, layout):
    """An array of ``shape``: contiguous, a batch of transposed matrices, a transposed batch (attention's heads),
    or every other column (no unit-stride axis: BLAS cannot read it in place)."""
    if layout == "contiguous":
        return _rng.standard_normal(shape).astype(dtype)
    if layout == "transposed matrices":
        return np.swapaxes(_rng.standard_normal(shape[:-2] + shape[-2:][::-1]).astype(dtype), -1, -2)
    if layout == "transposed batch":
        return np.swapaxes(_rng.standard_normal(shape[:-3] + (shape[-2], shape[-3], shape[-1])).astype(dtype), -3, -2)
    return _rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)[..., ::2]


LAYOUTS = ["contiguous", "transposed matrices", "transposed batch", "strided columns"]
FOLDED = [((3, 50, 64), (64, 96), False), ((2, 3, 40, 64), (96, 64), True), ((0, 50, 64), (64, 96), False),
          ((1, 300, 64), (96, 64), True)]
BATCHED = [((2, 3, 64, 48), (2, 3, 48, 80), False, False), ((2, 3, 48, 64), (2, 3, 48, 80), True, False),
           ((2, 3, 64, 48), (2, 3, 80, 48), False, True), ((2, 3, 48, 64), (2, 3, 80, 48), True, True),
           ((1, 3, 64, 48), (2, 1, 48, 80), False, False), ((64, 48), (4, 48, 80), False, False),
           ((4, 48, 64), (48, 80), True, False), ((0, 3, 64, 48), (0, 3, 48, 80), False, False)]


def _check(x, y, tx, ty):
    fn = _kernel(x, y, tx, ty)
    want = _want(x, y, tx, ty)
    tol = {"rtol": 1e-12, "atol": 1e-10} if x.dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-3}
    got = fn(x, y)
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **tol)
    kept = got.copy()
    fn(x * 2, y)  # a later call leaves this result alone: the kernel keeps nothing it hands out
    np.testing.assert_array_equal(got, kept)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sx,sy,ty", FOLDED, ids=str)
def test_a_folded_product_agrees_with_numpy(sx, sy, ty, layout, dtype):
    _check(_view(sx, dtype, layout), _view(sy, dtype, "contiguous"), False, ty)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sx,sy,tx,ty", BATCHED, ids=str)
def test_a_batched_product_agrees_with_numpy(sx, sy, tx, ty, layout, dtype):
    transposable = len(sx) >= 3 or layout != "transposed batch"
    _check(_view(sx, dtype, layout if transposable else "contiguous"),
           _view(sy, dtype, layout if len(sy) >= 3 or layout != "transposed batch" else "contiguous"), tx, ty)


NT = [((32, 128), (128, 128)), ((128, 32), (128, 32)), ((512, 32), (32, 32)), ((8, 256), (256, 256)),
      ((3, 4), (5, 4)), ((64, 256), (300, 256)), ((0, 128), (128, 128))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed matrices", "strided columns"])
@pytest.mark.parametrize("sx,sy", NT, ids=str)
def test_a_product_with_y_transposed_agrees_with_numpy(sx, sy, layout, dtype):
    """``x @ y.T`` on any layout and size (empty included); the result keeps the operands' dtype."""
    _check(_view(sx, dtype, layout), _view(sy, dtype, layout), False, True)
