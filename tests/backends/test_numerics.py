"""The numeric contract every engine holds (``design_docs/numerics.md``), checked on each engine against an
oracle nobody here wrote: C99's pow through Python's ``math.pow``, IEEE 754 overflow through plain float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from tests.backends.xla_harness import need_jax

ENGINES = ("numpy", "xla")
SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)
EXPONENTS = (0.5, -0.5, 2.0, 3.0, -1.0, -3.0, 0.0, -0.0, 1.0, 1 / 3, np.inf, -np.inf, np.nan)


def _run(engine: str, build, feed: dict) -> list:
    """Every value ``build(*vars of feed)`` returns, computed on ``engine`` in one run."""
    if engine != "numpy":
        need_jax()
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(name, list(v.shape), str(v.dtype)) for name, v in feed.items()]
        outs = build(*xs)
    with np.errstate(all="ignore"):
        return Executor(backend=engine).run(main, feed=feed, fetch_list=outs, scope=Scope())


def c99_pow(x: float, y: float) -> float:
    """C99's pow (Annex F): Python's math.pow, which raises where C returns a pole or NaN."""
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.copysign(math.inf, x) if y == int(y) and int(y) % 2 == 1 else math.inf
    except ValueError:
        if x == 0:  # a pole: 0 to a negative power
            odd = y == int(y) and int(y) % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf
        return math.nan  # a negative number to a non-integer power


def _assert_ieee_equal(got, want, what: str) -> None:
    """Equal as IEEE values in got's dtype: NaN where NaN, the same infinities and signs of zero, finite values to
    an ulp or two (float32's pow need not round as float64's rounded to float32 does)."""
    got = np.asarray(got)
    want = np.asarray(want, np.float64).astype(got.dtype)
    close = np.isclose(got, want, rtol=4 * np.finfo(got.dtype).eps, atol=0)
    same = close & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    bad = np.flatnonzero(~same)
    assert not bad.size, f"{what}: got {got.flat[bad]} where IEEE 754 and C99 give {want.flat[bad]} (at {bad})"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pow_follows_c99_at_every_special_value(engine, dtype):
    """numpy's fast path for x ** 0.5 (its square root) once gave NaN at -inf and -0 at -0."""
    x = np.array(SPECIAL, dtype)
    feed = {"x": x, **{f"y{k}": np.full((1,) if k % 2 else x.shape, y, dtype) for k, y in enumerate(EXPONENTS)}}

    def build(x, *ys):  # x ** a number, and x ** a var broadcast from one element (numpy's fast path) or not
        return [layers.pow(x, y) for y in EXPONENTS] + [layers.pow(x, y) for y in ys]

    got = _run(engine, build, feed)
    for k, y in enumerate(EXPONENTS * 2):
        want = [c99_pow(float(a), y) for a in x]
        _assert_ieee_equal(got[k], want, f"{engine} pow(x, {y}{' as a var' if k >= len(EXPONENTS) else ''})")


def _mask(y):
    """y < 0.5 as 0s and 1s of y's dtype: XLA rewrote a product with it as a select, which gives 0 where the mask
    is 0 and the other factor NaN or infinite (IEEE: NaN)."""
    return layers.cast(layers.less_than(y, layers.fill_constant([], y.dtype, 0.5)), y.dtype)


REWRITTEN = {
    "log(exp(x))": (lambda x, y: layers.log(layers.exp(x)), lambda x, y: np.log(np.exp(x))),
    "log(pow(x, y))": (lambda x, y: layers.log(layers.pow(x, y)), lambda x, y: np.log(c99_pows(x, y))),
    "exp(x) * exp(y)": (lambda x, y: layers.exp(x) * layers.exp(y), lambda x, y: np.exp(x) * np.exp(y)),
    "log(1 / sqrt(x))": (lambda x, y: layers.log(layers.reciprocal(layers.sqrt(x))),
                         lambda x, y: np.log(1 / np.sqrt(x))),
    "cross_entropy(exp(x))": (lambda x, y: layers.cross_entropy(layers.exp(x), layers.exp(y), soft_label=True),
                              lambda x, y: -np.sum(np.exp(y) * np.log(np.exp(x)), axis=-1, keepdims=True)),
    "x * cast(y < 0.5)": (lambda x, y: x * _mask(y), lambda x, y: x * (y < 0.5).astype(x.dtype)),
    "cast(y < 0.5) * x": (lambda x, y: _mask(y) * x, lambda x, y: (y < 0.5).astype(x.dtype) * x),
}
"""Compositions XLA's algebraic simplifier rewrites as if floats were real numbers, each with its IEEE value written
in plain numpy, one op at a time."""


def c99_pows(x, y):
    """C99's pow of each pair, in x's dtype."""
    pairs = zip(x.ravel().tolist(), y.ravel().tolist())
    return np.array([c99_pow(a, b) for a, b in pairs]).reshape(x.shape).astype(x.dtype)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_no_engine_rewrites_a_composition_into_another_ieee_result(engine, dtype):
    """XLA once gave log(exp(800)) = 800 (inf), log(pow(-2, 0.5)) = 0.35 (NaN), exp(800) * exp(-800) = 1 (NaN)."""
    x = np.array([[800.0, -800.0, 60.0, -2.0], [-0.0, 1.0, np.inf, 3.0]], dtype)
    y = np.array([[-800.0, 800.0, -60.0, 0.5], [2.0, 0.5, 0.5, -1.5]], dtype)
    got = _run(engine, lambda a, b: [build(a, b) for build, _ in REWRITTEN.values()], {"x": x, "y": y})
    for (name, (_, ieee)), value in zip(REWRITTEN.items(), got):
        with np.errstate(all="ignore"):
            want = ieee(x, y)
        _assert_ieee_equal(value, want, f"{engine} {name}")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_scaled_score_at_its_rows_max_exponentiates_to_one(engine):
    """softmax(0.1 * x @ x^T) with scores near 7e25 (float32): the max's own entry is 1 before normalizing. XLA's CPU
    code fused the 0.1 multiply into ``x - max`` (one rounding fewer) and got the product's rounding error there,
    -2.7e4 or 1e17, so exp gave 0 or inf and the rows NaN (once stepped around in the differential test's
    generator as ``KNOWN_XLA``)."""
    x = np.zeros((1, 1, 2, 4), np.float32)
    x[0, 0, 0] = [0.1, -0.2, 0.3, 0.05]
    x[0, 0, 1] = [3.87360542e12, 1.03184335e12, 2.61070761e13, 2.01199374e12]

    def build(v):
        scores = layers.scale(layers.matmul(v, v, transpose_y=True), 0.1)
        label = layers.fill_constant([1, 1, 2, 1], "int64", 1)
        return [layers.softmax(scores), layers.log_softmax(scores),
                layers.softmax_with_cross_entropy(scores, label, return_softmax=True)[0],
                layers.logsumexp(scores, dim=[3])]

    softmax, log_softmax, loss, logsumexp = _run(engine, build, {"x": x})
    np.testing.assert_array_equal(softmax, [[[[0, 1], [0, 1]]]])
    np.testing.assert_array_equal(log_softmax[..., 1], [[[0, 0]]])
    np.testing.assert_array_equal(loss, [[[[0], [0]]]])
    assert np.isfinite(logsumexp).all() and logsumexp[0, 0, 1] == np.float32(7.01697035e25)


def _naive_conv(x, w, stride: int, pad: int, dilation: int, groups: int):
    """(output, a function of the output gradient giving (input gradient, filter gradient)) of the 2-D convolution
    of the zero-padded x, one product at a time: the padding's zeros are multiplied (0 * inf is NaN, as in
    PyTorch); the input gradient, the adjoint, has products only with the input."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = [(s + 2 * pad - dilation * (k - 1) - 1) // stride + 1 for s, k in ((h, kh), (wd, kw))]
    taps = [(i, j, a, b) for i in range(oh) for j in range(ow) for a in range(kh) for b in range(kw)]
    group = [oc // (o // groups) for oc in range(o)]
    out = np.zeros((n, o, oh, ow))
    for oc, (i, j, a, b) in ((oc, t) for oc in range(o) for t in taps):
        r, s = i * stride + a * dilation, j * stride + b * dilation
        out[:, oc, i, j] += np.sum(xp[:, group[oc] * cg:(group[oc] + 1) * cg, r, s] * w[oc, :, a, b], axis=1)

    def grads(dout):
        dx, dw = np.zeros((n, c, h + 2 * pad, wd + 2 * pad)), np.zeros_like(w)
        for oc, (i, j, a, b) in ((oc, t) for oc in range(o) for t in taps):
            r, s = i * stride + a * dilation, j * stride + b * dilation
            dw[oc, :, a, b] += np.sum(xp[:, group[oc] * cg:(group[oc] + 1) * cg, r, s] * dout[:, oc, i, j, None], 0)
            if pad <= r < h + pad and pad <= s < wd + pad:
                dx[:, group[oc] * cg:(group[oc] + 1) * cg, r, s] += w[oc, :, a, b] * dout[:, oc, i, j, None]
        return dx[:, :, pad:h + pad, pad:wd + pad], dw

    return out, grads


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("stride,pad,dilation,groups", [(1, 1, 1, 1), (1, 2, 1, 2), (2, 1, 2, 1), (1, 1, 2, 2)])
def test_a_convolution_multiplies_its_padding_zeros_and_its_adjoint_has_none(engine, stride, pad, dilation, groups):
    """Infinities and NaN next to the padding: the filter's gradient and the output take them times the padding's
    zeros (NaN), the input's gradient has no such product. XLA's convolution skipped the padding (finite filter
    gradients); numpy's stride-1 input gradient multiplied an infinite filter by the zeros padding the output
    gradient, and its output with a non-finite filter was finite there. PyTorch gives this test's values."""
    rng = np.random.default_rng(stride * 100 + pad * 10 + dilation + groups)
    x, w = rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((4, 2 // groups, 3, 2))
    w[0, 0, 0, 0], w[1, 0, 2, 1] = np.inf, np.nan
    with np.errstate(all="ignore"):
        out, grads = _naive_conv(x, w, stride, pad, dilation, groups)
    dout = rng.standard_normal(out.shape)
    dout[0, 0, 0, 0], dout[1, 2, -1, -1], dout[0, 3, 0, -1] = np.inf, -np.inf, np.nan
    attrs = {"strides": [stride] * 2, "paddings": [pad] * 2, "dilations": [dilation] * 2, "groups": groups}

    def build(xv, wv, dv):
        return [append("conv2d", {"Input": xv, "Filter": wv}, attrs, out_slots=("Output",)),
                append("conv2d_input_grad", {"Filter": wv, "Output@GRAD": dv, "Input": xv}, attrs,
                       out_slots=("Input@GRAD",)),
                append("conv2d_filter_grad", {"Input": xv, "Output@GRAD": dv, "Filter": wv}, attrs,
                       out_slots=("Filter@GRAD",))]

    got = _run(engine, build, {"x": x, "w": w, "d": dout})
    with np.errstate(all="ignore"):
        want = [out, *grads(dout)]
    checked = zip(("output", "input gradient", "filter gradient"), got, want)
    for name, g, v in checked:
        np.testing.assert_array_equal(np.isnan(g), np.isnan(v), err_msg=f"{engine} {name}: NaN elsewhere")
        np.testing.assert_allclose(g, v, rtol=1e-12, atol=1e-12, err_msg=f"{engine} {name}")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integers_divide_truly_in_float64_and_wrap_in_their_dtype(engine, dtype):
    """int / int is float64 computed in float64 (xla once divided int32 by int32 in float32 and widened:
    0.3333333432674408 for 1 / 3); + and * wrap in the declared dtype."""
    info = np.iinfo(dtype)
    a = np.array([1, 2, -7, info.max, info.min, 123456789], dtype)
    b = np.array([3, 3, 2, 7, -3, 1000003], dtype)
    got_div, got_add, got_mul = _run(engine, lambda x, y: [layers.divide(x, y), x + y, x * y], {"a": a, "b": b})
    assert got_div.dtype == np.float64 and got_add.dtype == got_mul.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got_div, [float(p) / float(q) for p, q in zip(a.tolist(), b.tolist())])
    wrap = lambda v: (v - int(info.min)) % (1 << info.bits) + int(info.min)  # noqa: E731
    np.testing.assert_array_equal(got_add, [wrap(p + q) for p, q in zip(a.tolist(), b.tolist())])
    np.testing.assert_array_equal(got_mul, [wrap(p * q) for p, q in zip(a.tolist(), b.tolist())])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("diagonal", [2 ** 63 - 1, -2 ** 63, 2 ** 40 + 3, -(2 ** 50)])
def test_a_triangle_past_any_matrix_is_all_or_nothing(engine, diagonal):
    """tril/triu with a diagonal beyond any matrix: the whole matrix or none of it (xla wrapped INT64_MAX into a
    wrong mask, numpy raised OverflowError on INT64_MIN)."""
    x = np.arange(12.0).reshape(3, 4) + 1.0

    def build(v):
        return [append(t, {"X": v}, {"diagonal": diagonal}) for t in ("tril", "triu")]

    lower, upper = _run(engine, build, {"x": x})
    keep_all = diagonal > 0
    np.testing.assert_array_equal(lower, x if keep_all else np.zeros_like(x))
    np.testing.assert_array_equal(upper, np.zeros_like(x) if keep_all else x)
