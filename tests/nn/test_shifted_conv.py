"""Stride-1 convolutions as shifted products (``kernels/shifted``): the values of the convolution's definition,
gradients against finite differences (first and second order), and ``applies`` choosing them only where they
are measured to win."""
from __future__ import annotations


import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from gradgen.framework.backend.numpy.kernels import conv, shifted
from gradgen.program.layers.helper import append
from tests.grad.checking import check_op_gradients

SHAPES = [  # (N, C, H, W, O, kh, kw, ph, pw)
    (2, 16, 9, 11, 16, 3, 3, 1, 1), (3, 17, 8, 8, 19, 3, 2, 2, 0), (1, 16, 5, 7, 32, 5, 3, 4, 2),
    (2, 16, 6, 6, 16, 1, 1, 0, 0), (0, 16, 6, 6, 16, 3, 3, 1, 1), (2, 16, 3, 4, 16, 3, 3, 0, 1)]


@pytest.fixture
def every_size(monkeypatch):
    """The shifted products for convolutions of any size (tests keep them small)."""
    monkeypatch.setattr(shifted, "MIN_PRODUCT", 0)
    monkeypatch.setattr(shifted, "MAX_WASTE", 1.0)
    monkeypatch.setattr(shifted, "FILTER_GRAD_MAX_PIXELS", 10 ** 9)


def _reference(x, w, ph, pw):
    """conv2d by its definition: every output position's window times the filter."""
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    windows = sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # [N, C, Ho, Wo, kh, kw]
    return np.einsum("nchwij,ocij->nohw", windows, w)


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shifted_products_compute_the_convolution_and_its_gradients(every_size, shape, dtype, tol):
    n, c, h, w_, o, kh, kw, ph, pw = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, w_)).astype(dtype)
    w = rng.standard_normal((o, c, kh, kw)).astype(dtype)
    pads = (ph, ph, pw, pw)
    assert shifted.applies(x.shape, w.shape, (1, 1), (1, 1), pads, 1, dtype)
    want = _reference(x.astype(np.float64), w.astype(np.float64), ph, pw)
    got = shifted.conv(x, w, pads, np.full(want.shape, np.nan, dtype))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))
    # The gradients are the adjoints: <conv(x), g> = <x, input_grad(g)> = <w, filter_grad(x, g)>.
    g = rng.standard_normal(want.shape).astype(dtype)
    gx = conv.convolution_input_adjoint(w, g, x.shape, groups=1, paddings=[ph, pw], strides=[1, 1], dilations=[1, 1])
    gw = shifted.filter_grad(x, g, pads, np.full(w.shape, np.nan, dtype))
    total = float(np.sum(want * g))
    scale = tol * max(1.0, float(np.sum(np.abs(want * g))))
    assert abs(float(np.sum(x * gx)) - total) <= scale and abs(float(np.sum(w * gw)) - total) <= scale


def test_non_contiguous_inputs_give_the_same_values(every_size):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 16, 8, 9)).transpose(0, 1, 3, 2)  # a transposed view
    w = rng.standard_normal((16, 16, 3, 3))[:, :, ::-1]  # a reversed view
    pads = (1, 1, 1, 1)
    np.testing.assert_allclose(shifted.conv(x, w, pads, np.empty((3, 16, 9, 8))), _reference(x, w, 1, 1),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 16, 5, 6, 16, 3, 3, 1, 1), (1, 16, 4, 5, 16, 2, 3, 1, 2)], ids=str)
def test_a_conv2d_on_shifted_products_matches_finite_differences_to_second_order(every_size, shape):
    n, c, h, w_, o, kh, kw, ph, pw = shape
    rng = np.random.default_rng(3)
    assert shifted.applies((n, c, h, w_), (o, c, kh, kw), (1, 1), (1, 1), (ph, ph, pw, pw), 1, "float64")
    def build(x, w):
        return append("conv2d", {"Input": x, "Filter": w}, {"strides": [1, 1], "paddings": [ph, pw],
                                                            "dilations": [1, 1], "groups": 1}, out_slots=("Output",))

    check_op_gradients(build, {"x": rng.standard_normal((n, c, h, w_)), "w": 0.3 * rng.standard_normal((o, c, kh, kw))})


@pytest.mark.parametrize("case, applies", [
    (((32, 64, 32, 32), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), True),  # ResNet's layers
    (((64, 6, 12, 12), (16, 6, 5, 5), (1, 1), (1, 1), (0, 0, 0, 0), 1, "float32"), False),  # LeNet's: 6 channels
    (((64, 16, 14, 14), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), False),  # thin products
    (((8, 64, 32, 32), (64, 64, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, "float32"), False),  # stride 2
    (((8, 64, 32, 32), (64, 64, 3, 3), (1, 1), (2, 2), (1, 1, 1, 1), 1, "float32"), False),  # dilated
    (((8, 64, 32, 32), (64, 32, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2, "float32"), False),  # grouped
    (((8, 64, 32, 32), (64, 64, 3, 3), (1, 1), (1, 1), (3, 3, 1, 1), 1, "float32"), False),  # padded past the kernel
    (((8, 64, 32, 32), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "int64"), False),  # no BLAS dtype
    (((8, 64, 32, 32, 4), (64, 64, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1,) * 6, 1, "float32"), False),  # 3-D
    (((16, 512, 7, 7), (512, 512, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), False),  # 2 of 9 columns lost
], ids=["resnet", "lenet", "thin", "stride", "dilation", "groups", "pads", "int", "3d", "waste"])
def test_applies_where_measured_to_win(case, applies):
    assert shifted.applies(*case) is applies


@pytest.mark.parametrize("case, applies", [
    (((32, 64, 32, 32), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), False),  # ResNet's: a tie
    (((8, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), False),  # lost on big images
    (((16, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, "float32"), True),  # won on small ones
], ids=["resnet", "56x56", "14x14"])
def test_the_filter_gradient_takes_shifted_products_only_on_small_images(case, applies):
    assert shifted.applies_to_filter_grad(*case) is applies
