"""Products big enough for the chosen BLAS: folded ``x[..., k] @ y[k, n]`` (one 2-D GEMM) and true batched
products (one batched GEMM), on strided views, broadcast batch dims and buffers, against numpy's einsum."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.backend.numpy import blas
from gradgen.framework.backend.numpy.kernels import KERNELS, takes_out
from gradgen.framework.backend.numpy.plan import build_plan
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard
from tests.extras import require
from tests.framework.op_harness import Case, one_op_program

_rng = np.random.default_rng(11)


@pytest.fixture(autouse=True, params=["auto", "mkl"])
def provider(request):
    """Every test on this CPU's default BLAS and on MKL (the default on Intel's CPUs only), so both paths run
    whatever machine the suite is on."""
    if request.param == "mkl":
        require(None if blas._mkl_path() else "the mkl wheel", "pip install gradgen[mkl]")
    blas.use_blas(request.param)
    yield request.param
    blas.use_blas("auto")


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
    if takes_out(fn):
        buf = np.full(want.shape, 7, x.dtype)
        assert fn(x, y, out=buf) is buf  # the plan's buffer is written, not a fresh array
        np.testing.assert_allclose(buf, want, **tol)
        small = np.full(want.shape[:-1] + (want.shape[-1] + 1,), 7, x.dtype)
        np.testing.assert_allclose(fn(x, y, out=small), want, **tol)
        assert (small == 7).all()  # a buffer that does not fit is left alone


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


def test_products_on_the_blas_write_their_buffer():
    """Folded and batched products take ``out``; where the provider has a batched GEMM, batched ones do too."""
    x, w = np.ones((2, 3, 4)), np.ones((4, 5))
    assert takes_out(_kernel(x, w)) and takes_out(_kernel(np.ones((3, 4)), w))
    assert not takes_out(_kernel(x, np.ones(4)))  # a 1-D operand: numpy allocates
    batched = blas.PROVIDER is not None and blas.PROVIDER.name != "numpy" and blas.PROVIDER.gemm_batch is not None
    assert takes_out(_kernel(x, np.ones((2, 4, 5)))) == batched
    assert takes_out(_kernel(np.ones((2, 4, 3)), w, tx=True)) == batched  # x transposed: its batch dims cannot fold into rows


def test_gemm_batch_rejects_what_does_not_fit():
    a, b = np.ones((2, 64, 48)), np.ones((2, 48, 80))
    with pytest.raises(ValueError, match="do not agree"):
        blas.gemm_batch(False, False, a, b, np.empty((2, 64, 81)))
    with pytest.raises(ValueError, match="dtype"):
        blas.gemm_batch(False, False, a, b, np.empty((2, 64, 80), np.float32))


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_the_folded_weight_gradient_of_an_fc_on_a_sequence_fuses_into_its_sgd_update(dtype, rtol):
    """The fold makes the weight gradient a 2-D product, so it meets ``sgd`` as one GEMM into the weights."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 5, 40], dtype)
        loss = layers.reduce_mean(layers.square(layers.fc(x, 30, name="fc", bias=False)))
        optimizer.SGD(learning_rate=0.1).minimize(loss)
    feed = {"x": np.random.default_rng(3).standard_normal((6, 5, 40)).astype(dtype)}
    options = PlanOptions(regions=False)
    plan = build_plan(main.global_block(), list(feed), [loss.name], options)
    ops = main.global_block().ops
    assert any(ops[s.index].type == "sgd" and len(s.ops) == 2 and ops[s.ops[0]].type == "matmul" for s in plan.steps)

    def train(exe):
        scope = Scope()
        exe.run(startup, scope=scope)
        return [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(3)], scope["fc.w"]

    fused, fused_w = train(Executor(options=options))
    plain, plain_w = train(Executor(options=PlanOptions(fuse=False)))
    np.testing.assert_allclose(fused, plain, rtol=rtol)
    np.testing.assert_allclose(fused_w, plain_w, rtol=rtol, atol=rtol * 1e-2)


NT = [((32, 128), (128, 128)), ((128, 32), (128, 32)), ((512, 32), (32, 32)), ((8, 256), (256, 256)),
      ((3, 4), (5, 4)), ((64, 256), (300, 256)), ((0, 128), (128, 128))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed matrices", "strided columns"])
@pytest.mark.parametrize("sx,sy", NT, ids=str)
def test_a_product_with_y_transposed_agrees_with_numpy(sx, sy, layout, dtype):
    """``x @ y.T`` between ``SMALL_PRODUCT`` and ``CALLING_THREAD_PRODUCT`` multiply-adds runs as an NN product
    on a copy of the smaller operand's transpose (``blas.product_nt``): either way round, on any layout, and
    outside that window (below, above, empty) as numpy's matmul; the result keeps the operands' dtype."""
    _check(_view(sx, dtype, layout), _view(sy, dtype, layout), False, True)


def test_product_nt_leaves_other_dtypes_to_numpy():
    a, b = np.arange(32 * 128).reshape(32, 128), np.arange(128 * 128).reshape(128, 128) % 7
    got = blas.product_nt(a, b)
    assert got.dtype == (a @ b.T).dtype and (got == a @ b.T).all()
    mixed = blas.product_nt(a.astype(np.float32), b.astype(np.float64))
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed, a.astype(np.float64) @ b.T, rtol=1e-6)
