"""The conv and pool kernels lowered to matrix products and tap loops, against the einsum kernels they replaced
(tests/nn/einsum_conv.py): float64 results equal to rounding, float32 computed as float32, across strides,
paddings, dilations, groups, odd sizes, batches of 0 and 1, 1x1 kernels and kernels as large as the input, on
both product paths (numpy's matmul; the chosen BLAS one product at a time) and with the batch split into chunks.
Max pooling's gradient and select: ties go to the first maximum, NaN and inf behave as before."""
from __future__ import annotations

import numpy as np
import pytest

from tests.extras import require
from gradgen.framework.backend.numpy import blas
from gradgen.framework.backend.numpy.kernels import XP, conv
from gradgen.program.ops import conv as ops
from tests.nn import einsum_conv as old


class _Op:
    """Just what a kernel factory reads of an op: its attrs."""

    def __init__(self, **attrs):
        self.attrs = attrs

    def attr(self, name):
        return self.attrs[name]


CONV_CASES = [  # x shape, filter shape, strides, paddings, dilations, groups
    ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((3, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 2), (1, 1), 2),
    ((2, 3, 11, 10), (5, 3, 3, 3), (2, 3), (2, 1), (2, 3), 1),
    ((2, 3, 9, 8), (4, 3, 3, 2), (1, 1), (2, 1), (2, 3), 1),  # stride 1 (wide rows), dilated, padded
    ((2, 4, 6, 5), (6, 2, 2, 3), (1, 1), (0, 1), (1, 1), 2),
    ((2, 4, 6, 7), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),  # depthwise, two filters per channel
    ((2, 4, 7, 7), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4),  # depthwise
    ((1, 3, 5, 5), (2, 3, 1, 1), (1, 1), (0, 0), (1, 1), 1),  # 1x1 kernel, batch 1
    ((2, 2, 4, 5), (3, 2, 4, 5), (1, 1), (0, 0), (1, 1), 1),  # kernel as large as the input
    ((0, 3, 5, 5), (2, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # empty batch
    ((2, 3, 5, 5), (2, 3, 3, 3), (3, 3), (2, 2), (1, 1), 1),
    ((3, 1, 28, 28), (6, 1, 5, 5), (1, 1), (0, 0), (1, 1), 1),
]

PATHS = ["numpy", "blas", "blas-one-image-chunks"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """numpy: small products on np.matmul, as here by default; blas: every product through MKL
    (``SMALL_PRODUCT`` 0); one-image chunks: the batch split into one column matrix per image."""
    if request.param != "numpy":
        require(None if blas._mkl_path() else "the mkl wheel", "pip install gradgen[mkl]")
        blas.use_blas("mkl")  # whatever this CPU's default: the provider path is what is tested
        monkeypatch.setattr(blas, "SMALL_PRODUCT", 0)
    if request.param.endswith("chunks"):
        monkeypatch.setattr(conv, "COLUMN_BYTES", 1)
    yield request.param
    blas.use_blas("auto")


def _attrs(strides, paddings, dilations, groups, **more):
    return _Op(strides=list(strides), paddings=list(paddings), dilations=list(dilations), groups=groups, **more)


def _conv_inputs(case, dtype, seed=0):
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    op = _attrs(s, p, d, g)
    gout = rng.standard_normal(old.conv2d(op)(x, w).shape).astype(dtype)
    return op, x, w, gout


def _close(got, want, dtype):
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    tol = 1e-12 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_conv2d_and_its_gradients_match_the_einsum_kernels(case, dtype, path):
    op, x, w, gout = _conv_inputs(case, dtype)
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, gout))
    want64 = [old.conv2d(op)(x64, w64), old.conv2d_filter_grad(op)(x64, g64, w64),
              old.conv2d_input_grad(op)(w64, g64, x64)]
    got = [ops.conv2d(XP, x, w, **op.attrs), ops.conv2d_filter_grad(XP, x, gout, w, **op.attrs),
           ops.conv2d_input_grad(XP, w, gout, x, **op.attrs)]
    for g, want in zip(got, want64):
        _close(g, want, dtype)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_conv2d_transpose_matches_the_einsum_kernel(case, dtype, path):
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal((xs[0], ws[0], 3, 4)).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    for extra in {(0, 0), (s[0] - 1, s[1] - 1)}:
        op = _attrs(s, p, d, g, output_padding=list(extra))
        try:
            want = old.conv2d_transpose(op)(x.astype(np.float64), w.astype(np.float64))
        except ValueError:  # paddings that leave no output: the schema refuses those
            continue
        _close(ops.conv2d_transpose(XP, x, w, **op.attrs), want, dtype)


def test_conv_kernels_never_return_scratch():
    op, x, w, gout = _conv_inputs(CONV_CASES[1], "float64")
    for compute, args in ((ops.conv2d, (x, w)), (ops.conv2d_filter_grad, (x, gout, w)),
                          (ops.conv2d_input_grad, (w, gout, x))):
        fn = lambda *arrays: compute(XP, *arrays, **op.attrs)  # noqa: E731
        first = fn(*args)
        kept = first.copy()
        fn(*(a * 2 for a in args))  # another call reuses the scratch arrays: earlier results stay
        np.testing.assert_array_equal(first, kept)


POOL_CASES = [  # x shape, ksize, strides, paddings, ceil_mode
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), False),  # windows side by side
    ((2, 3, 9, 7), (2, 2), (2, 2), (0, 0), True),
    ((2, 3, 9, 7), (2, 2), (2, 2), (0, 0), False),
    ((1, 2, 7, 8), (3, 3), (2, 2), (1, 0, 0, 1), True),
    ((2, 2, 5, 6), (3, 2), (1, 2), (1, 1), False),  # overlapping windows
    ((1, 2, 6, 5), (2, 3), (3, 2), (1, 0, 2, 1), True),
    ((1, 1, 5, 5), (5, 5), (1, 1), (0, 0), False),  # one window, the whole input
    ((1, 2, 4, 4), (1, 1), (1, 1), (0, 0), False),
    ((0, 2, 4, 4), (2, 2), (2, 2), (0, 0), False),  # empty batch
]


def _pool_op(case, kind, exclusive):
    _, k, s, p, ceil = case
    return _Op(pooling_type=kind, ksize=list(k), strides=list(s), paddings=list(p), exclusive=exclusive,
               ceil_mode=ceil, dilations=[1, 1])


def _tied(shape, seed, dtype="float64"):
    """Small integers: most windows hold their maximum more than once."""
    return np.random.default_rng(seed).integers(-2, 3, shape).astype(dtype)


def _assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("kind, exclusive", [("max", True), ("avg", True), ("avg", False)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pool_kernels_match_the_einsum_kernels_ties_included(case, kind, exclusive, dtype):
    op = _pool_op(case, kind, exclusive)
    x = _tied(case[0], 0, dtype)
    out = old.pool2d(op)(x)
    gout, d = _tied(out.shape, 1, dtype), np.random.default_rng(2).standard_normal(case[0]).astype(dtype)
    _assert_same(ops.pool2d(XP, x, **op.attrs), out)
    _assert_same(ops.pool2d_grad(XP, x, gout, **op.attrs), old.pool2d_grad(op)(x, gout))
    if kind == "max":
        _assert_same(ops.pool2d_select(XP, x, d, **op.attrs), old.pool2d_select(op)(x, d))


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")  # 0 * inf, as before
@pytest.mark.parametrize("case", POOL_CASES[:6], ids=str)
def test_max_pool_nan_and_inf_behave_as_before(case):
    op = _pool_op(case, "max", True)
    x = _tied(case[0], 4)
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = -np.inf
    flat[5::13] = np.inf
    out = old.pool2d(op)(x)
    gout = _tied(out.shape, 5)
    gout.reshape(-1)[::5] = np.inf
    d = _tied(x.shape, 6)
    d.reshape(-1)[::9] = np.nan
    _assert_same(ops.pool2d(XP, x, **op.attrs), out)
    _assert_same(ops.pool2d_grad(XP, x, gout, **op.attrs), old.pool2d_grad(op)(x, gout))
    _assert_same(ops.pool2d_select(XP, x, d, **op.attrs), old.pool2d_select(op)(x, d))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_conv_net_with_a_batch_known_at_run_time_trains_as_with_the_einsum_kernels(dtype):
    """conv (grouped, padded), max and avg pooling, a transposed conv and their gradients through the executor,
    batch -1 in the program: the new kernel table against the old one, and the declared dtype kept."""
    from dataclasses import replace

    from gradgen.framework import Executor, Scope, append_backward
    from gradgen.framework.backend.numpy.kernels import KERNELS
    from gradgen.framework.backend.numpy.plan_data import PlanOptions
    from gradgen.program import Program, layers, program_guard

    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4, 9, 8], dtype)
        h = layers.conv2d(x, 6, 3, padding=1, groups=2, act="tanh", name="c1")
        h = layers.pool2d(h, 2, "max", stride=2, ceil_mode=True)
        h = layers.conv2d(h, 6, 2, stride=1, groups=6, name="c2")
        h = layers.conv2d_transpose(h, 3, 3, stride=2, output_padding=1, name="t")
        h = layers.pool2d(h, 3, "avg", stride=2, padding=[1, 0, 0, 1], exclusive=True)
        loss = layers.mean(layers.square(h))
        grads = append_backward(loss)
    fetch = [loss] + [g for _, g in grads]
    feed = {"x": np.random.default_rng(9).standard_normal((5, 4, 9, 8)).astype(dtype)}
    results = []
    for table in ({**KERNELS, **old.KERNELS}, KERNELS):
        exe, scope = Executor(options=replace(PlanOptions(), kernels=table)), Scope()
        exe.run(startup, scope=scope)
        for p, _ in grads:  # the same parameters for both tables
            scope.set(p.name, np.random.default_rng(len(p.name)).standard_normal(p.shape).astype(dtype))
        results.append(exe.run(main, feed=feed, fetch_list=fetch, scope=scope))
    for got, want in zip(*results[::-1]):
        _close(got, want.astype(np.float64), dtype)
