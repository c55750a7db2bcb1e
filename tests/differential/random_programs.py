"""Random programs for the differential test: every engine against the reference interpreter (numpy).

``piece(rng, k)`` appends one small random computation to the program being built: a float chain over a
3-D or 4-D input (elementwise ops with broadcasting, 3-D and 4-D products followed by reshape, transpose and
slices, reductions, softmax, a convolution with pooling, batch norm, a ``cond`` and a ``while`` loop, powers
and the compositions XLA's simplifier would rewrite: ``design_docs/numerics.md``), whose loss (in a quarter of
the pieces a softmax cross-entropy) gets gradients and an SGD or momentum update; or an integer chain (exact
arithmetic, comparisons, true division into floats, casts). Inputs are drawn with zeros, NaN, infinities, huge
and tiny values, in empty, size-1 and larger batches that meet the program's -1 dims at run time.

``build(seed, pieces)`` makes a program of several independent pieces (they share nothing, so each piece's
values are what it would compute alone) with the feeds and initial parameters to run it from; one compile
serves them all, which keeps a few thousand pieces within the suite's time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradgen.framework import append_backward, gradients, optimizer
from gradgen.program import Program, layers as L, program_guard

__all__ = ["CONTROL_FLOW", "Built", "build", "build_second_order"]

UNARY = ("relu", "tanh", "sigmoid", "exp", "square", "abs", "sin", "cos", "softplus", "silu", "gelu", "erf",
         "sqrt", "log", "reciprocal", "sign", "elu", "leaky_relu")
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
SPECIALS = (0.0, -0.0, np.nan, np.inf, -np.inf, 1e15, -1e15, 1e-30, 88.0, -87.0, 710.0, -708.0)
"""Values some feeds hold: signed zeros, NaN, infinities, exp's overflow edges (float32 at 88, float64 at 710)
and its last normal results below (-87 and -708: XLA's CPU code flushes subnormals to zero, so exp(-88) in float32
is 0 there and 6e-39 on numpy, ``design_docs/numerics.md``), and large and tiny magnitudes. Large is 1e15, whose
products stay finite in float32: a sum of products near float32's limit overflows or not by the order of its
additions, which an engine may choose."""

NORMAL_EXP_FLOOR = {"float32": -87.0, "float64": -708.0}
"""Below these, exp's result is subnormal, which XLA's CPU code flushes to zero (``SPECIALS``)."""


@dataclass
class Built:
    """A program of independent pieces and its startup program (layers' parameters, optimizer state), what to
    feed it, the first values of the parameters the pieces made themselves, and what to fetch."""

    main: Program
    startup: Program
    feed: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    fetch: list = field(default_factory=list)
    """Names to fetch: every piece's values, its parameters' gradients and the updated parameters."""
    described: list = field(default_factory=list)
    """One line per piece: what it is, for the failure message."""


class _Piece:
    """Building one piece: names made unique by the piece's number, values drawn from one generator."""

    def __init__(self, rng: np.random.Generator, k: int, built: Built, dtype: str, batch: int,
                 aside: np.random.Generator | None = None):
        self.rng, self.k, self.built, self.dtype, self.batch = rng, k, built, dtype, batch
        self.aside = aside if aside is not None else _aside(0, k)
        """Draws for what came after the seeds were tuned (the cross-entropy loss): ``rng``'s stream, and with
        it every program the earlier draws made, stays as it was."""
        self.steps: list[str] = []

    def data(self, shape: tuple[int, ...], special: bool = True) -> object:
        name = f"p{self.k}_x{len(self.built.feed)}"
        value = self.rng.standard_normal((self.batch,) + shape).astype(self.dtype)
        if special and value.size and self.rng.random() < 0.3:
            picks = self.rng.integers(0, value.size, size=max(1, value.size // 8))
            value.flat[picks] = self.rng.choice(np.array(SPECIALS, dtype=self.dtype), size=picks.size)
        self.built.feed[name] = value
        return L.data(name, [-1, *shape], self.dtype)

    def param(self, shape: tuple[int, ...]) -> object:
        name = f"p{self.k}_w{len(self.built.params)}"
        self.built.params[name] = (self.rng.standard_normal(shape) * 0.5).astype(self.dtype)
        return L.create_parameter(list(shape), self.dtype, name=name)

    def note(self, what: str) -> None:
        self.steps.append(what)


SIN_COS_BOUND = {"float64": 100.0, "float32": 10.0}
"""How far sin's and cos's inputs are clipped (NaN stays NaN): at 1e15 one ulp of the input is 0.125, so the order a
product's sum was added in (an engine's choice) would decide their value. In float32 one ulp at 100 is 7.6e-6, and
a layer norm and a product before it can round a value near 100 by a few hundred of them, over the comparison's
1e-3 (seed 1029 past CI's seeds: cos 0.7135 against 0.7150); at 10 an ulp is 9.5e-7."""


def _unary(p: _Piece, x):
    """One unary op; sin and cos take their input clipped (``SIN_COS_BOUND``), sign its subnormals as zeros
    (``_normal_or_zero``)."""
    kind = p.rng.choice(UNARY)
    p.note(kind)
    if kind in ("sin", "cos"):
        bound = SIN_COS_BOUND[p.dtype]
        x = L.clip(x, -bound, bound)
    if kind == "sign":
        x = _normal_or_zero(p, x)
    return getattr(L, kind)(x)


def _normal_or_zero(p: _Piece, x):
    """x with its subnormal values made zeros (NaN and infinities kept). XLA's CPU code flushes a subnormal result
    to zero where numpy keeps it, a difference within any tolerance until ``sign`` makes it 0 against +-1 (seed
    941 of one-piece programs: a product of 1e-30 feeds, float32)."""
    tiny = L.fill_constant([], p.dtype, float(np.finfo(p.dtype).tiny))
    return x * L.cast(L.greater_equal(L.abs(x), tiny), p.dtype)


POWERS = (0.5, -0.5, 2.0, 3.0, -1.0, 1.0 / 3.0, 0.0)
"""Exponents of ``_power``: C99's special cases meet them at the feeds' zeros, infinities and NaN (numpy once
took x ** 0.5 as sqrt(x): NaN at -inf)."""


def _power(p: _Piece, x):
    """A fed base (with its zeros, infinities and NaN) to a number or to a fed exponent holding special values too,
    added to x. Not the chain as the base: XLA's CPU code flushes a subnormal base to zero, and a negative power of
    it is inf there, finite on numpy."""
    base = p.data(tuple(x.shape[1:]))
    if p.rng.random() < 0.5:
        factor = float(p.rng.choice(POWERS))
        p.note(f"pow {factor:.3g}")
        return x + L.pow(base, factor)
    p.note("pow[fed exponent]")
    return x + L.pow(base, p.data(tuple(x.shape[1:])))


def _overflow(p: _Piece, x):
    """Compositions XLA's algebraic simplifier rewrote as if floats were real: log(exp(x)) (x at 88 or 710 has
    exp overflow), exp(x) * exp(y) with y fed (inf * 0 where one overflows and the other underflows), and
    log(y ** 0.5) added to x, y fed (NaN for a negative y, where the rewrite gave 0.5 log|y|).

    Stepped around, each an engine's choice rather than a wrong answer: exp's inputs are clipped below at
    ``NORMAL_EXP_FLOOR`` (the product's two at half of it: exp(-44) * exp(-44) is subnormal in float32, and its
    tanh then -inf under log on xla, -87.9 on numpy, seed 10,627) and log(pow) takes fed values, never the chain's,
    since XLA's CPU code flushes subnormal results and inputs to zero (log of a subnormal is -47 on numpy, -inf
    there); the product passes through tanh, as values near float32's limit would make later sums overflow or not
    by their order of additions; not exp(x) * exp(-x), whose gradient is 0 by cancellation, left as a rounding by
    an FMA."""
    kind = int(p.rng.integers(3))
    p.note(("log(exp)", "exp(x)*exp(y)", "log(pow)")[kind])

    def exp(v, floor: float = NORMAL_EXP_FLOOR[p.dtype]):
        return L.exp(L.clip(v, floor, float("inf")))

    if kind == 0:
        return L.log(exp(x))
    if kind == 1:
        half = NORMAL_EXP_FLOOR[p.dtype] / 2
        return L.tanh(exp(x, half) * exp(p.data(tuple(x.shape[1:])), half))
    return x + L.log(L.pow(p.data(tuple(x.shape[1:])), 0.5))


def _softmax(p: _Piece, x):
    """softmax over the last axis of the chain itself: its infinities and NaN, and large finite values."""
    p.note("softmax")
    return L.softmax(L.scale(x, 0.5))


def _binary(p: _Piece, x):
    """x op y with y of x's shape, of its last dim only (broadcast), or a parameter of its last dims."""
    kind = p.rng.choice(BINARY)
    form = p.rng.integers(3)
    shape = tuple(x.shape[1:])
    y = p.data(shape) if form == 0 else p.param(shape[-1:]) if form == 1 else p.param(shape)
    p.note(f"{kind}[{('same', 'last dim', 'param')[form]}]")
    if kind == "divide" or p.rng.random() < 0.5:
        # Never divide by the chain: a product of zeros is +0 or -0 by the order its engine adds in (BLAS
        # leaves it open), and the quotient's infinity takes that sign. Fed zeros have theirs.
        return getattr(L, kind)(x, y)
    return getattr(L, kind)(y, x)


def _product(p: _Piece, x):
    """A product of x's last dim, then a view of its result: reshape, transpose or slice."""
    n = x.shape[-1]
    k = int(p.rng.integers(1, 5))
    y = L.matmul(x, p.param((n, k)))
    view = p.rng.integers(3)
    rank = len(x.shape)
    if view == 0:
        p.note(f"matmul {rank}-D, reshape")
        y = L.reshape(y, [-1, *y.shape[1:-2], y.shape[-2] * y.shape[-1]])
        y = L.reshape(y, [-1, *y.shape[1:-1], x.shape[-2], k])
    elif view == 1:
        perm = list(range(rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        p.note(f"matmul {rank}-D, transpose")
        y = L.transpose(L.transpose(y, perm=perm), perm=perm)
    else:
        p.note(f"matmul {rank}-D, slice")
        y = L.slice(y, axes=[rank - 1], starts=[0], ends=[max(1, k - 1)])
        y = L.concat([y, y], axis=rank - 1) if k > 1 else y
        y = L.slice(y, axes=[rank - 1], starts=[0], ends=[k])
    return L.matmul(y, p.param((y.shape[-1], n)))  # back to x's shape


def _batched(p: _Piece, x):
    """Attention's shape: x @ x^T over the last two dims, softmax, then back onto x. Scores reach 1e29 from the
    feeds' 1e15: XLA's CPU code fuses the softmax's scale into its ``x - max``, and the max's own entry once came
    out as the product's rounding error (``program/ops/nn.minus_max``)."""
    p.note("batched matmul, softmax")
    scores = L.matmul(x, x, transpose_y=True)
    return L.matmul(L.softmax(L.scale(scores, 0.1)), x)


def _reduce(p: _Piece, x):
    """A reduction over one axis, kept and multiplied back onto x. reduce_max only as a piece's first step: after
    other steps, two entries an ulp apart in one engine can be a tie in the other (a normalization of a short
    row), and the gradient of a tie goes elsewhere."""
    kind = p.rng.choice(("reduce_sum", "reduce_mean", "reduce_max" if not p.steps else "reduce_sum"))
    axis = int(p.rng.integers(1, len(x.shape)))
    p.note(f"{kind} axis {axis}, keep")
    return getattr(L, kind)(x, dim=[axis], keep_dim=True) * x


def _norm(p: _Piece, x):
    """A normalization with a residual (a transformer's ``x + norm(x)``). Without it, a later sum along the
    normalized axis is 0 up to rounding, and what abs or relu make of that rounding is an engine's choice."""
    if len(x.shape) == 4 and p.rng.random() < 0.5:
        p.note("batch_norm")
        return x + L.batch_norm(x, name=f"p{p.k}_bn{len(p.steps)}")
    p.note("layer_norm")
    return x + L.layer_norm(x, begin_norm_axis=len(x.shape) - 1, name=f"p{p.k}_ln{len(p.steps)}")


def _conv(p: _Piece, x):
    """A 3x3 convolution keeping the size (padding 1, or padding 2 with dilation 2), then 2x2 pooling and back up
    by repeating, or a padded 3x3 pooling keeping the size (4-D inputs only). Infinities and NaN reach the padding
    in the forward values and in the gradients: the padding's zeros multiply them (``design_docs/numerics.md``)."""
    if len(x.shape) != 4:
        return _unary(p, x)
    c = x.shape[1]
    kind = p.rng.choice(("max", "avg"))
    dilated = p.rng.random() < 0.3
    p.note(f"conv2d{' dilated' if dilated else ''}, pool2d {kind}")
    y = L.conv2d(x, c, 3, padding=2 if dilated else 1, dilation=2 if dilated else 1,
                 name=f"p{p.k}_conv{len(p.steps)}")
    if p.rng.random() < 0.3:
        p.note("pool2d padded")
        return y + L.pool2d(y, 3, kind, stride=1, padding=1)
    if x.shape[2] % 2 or x.shape[3] % 2:
        return y
    pooled = L.pool2d(y, 2, kind, stride=2)
    up = L.concat([pooled, pooled], axis=3)
    up = L.reshape(L.concat([up, up], axis=2), [-1, *x.shape[1:]])
    return y + up


def _cond(p: _Piece, x):
    """A branch on mean(|x|) > 0.8. Not on sum(x) > 0: after a normalization the sum is 0 up to rounding, and
    rounding (an engine's choice of order) would pick the branch."""
    p.note("cond")
    pred = L.greater_than(L.reduce_mean(L.abs(x)), L.fill_constant([], p.dtype, 0.8))
    return L.cond(pred, lambda: L.tanh(x) * 2.0, lambda: L.square(x))


def _loop(p: _Piece, x):
    """x through ``n`` steps of ``h = tanh(h @ W + x)``, n fed (0 to 3)."""
    p.note("while")
    n_name = f"p{p.k}_n{len(p.steps)}"
    p.built.feed[n_name] = np.int64(p.rng.integers(0, 4))
    n = L.data(n_name, [], "int64")
    w = p.param((x.shape[-1], x.shape[-1]))
    zero = L.fill_constant([], "int64", 0)
    one = L.fill_constant([], "int64", 1)
    _, h = L.while_loop(lambda t, h: L.less_than(t, n),
                        lambda t, h: [L.add(t, one), L.tanh(L.matmul(h, w) + x)], [zero, x], max_iterations=8)
    return h


STEPS = (_unary, _unary, _binary, _binary, _product, _batched, _reduce, _norm, _conv, _cond, _loop, _power,
         _overflow, _softmax)
CONTROL_FLOW = (_cond, _loop)
"""The steps that make sub-blocks, which the torch engine does not run."""


LARGE_IN_FIRST_PRODUCT = 1e4
"""What the first product's input holds where its feed drew +-1e15. That product's parameter gradient sums x's
rows times the loss's gradient, often one number down a column: +-1e15 rows cancel there, and the order of the
sum's additions, an engine's choice, decides the result (seed 70 on an AMD EPYC: OpenBLAS's float32 sum 3.4e7,
XLA's 0, exactly 1.3), while the comparison's tolerance scales with the result, not its terms. The chain still
meets 1e15 through its other feeds."""


def _without_large_magnitudes(p: _Piece, x) -> None:
    """Put ``LARGE_IN_FIRST_PRODUCT`` where feed ``x`` holds +-1e15 (its other special values stay; no draw)."""
    value = p.built.feed[x.name]
    large = np.abs(value) == np.asarray(1e15, value.dtype)
    value[large] = np.sign(value[large]) * LARGE_IN_FIRST_PRODUCT


CROSS_ENTROPY_SHARE = 0.25
"""The share of float pieces whose loss is a softmax cross-entropy of the chain (``_cross_entropy``)."""


def _cross_entropy(p: _Piece, h):
    """The mean softmax cross-entropy of the chain's last axis as classes: hard labels (int64 or int32, a few rows
    at the ignored index -100) or soft labels that need not sum to 1, drawn from ``_Piece.aside``. The chain's
    NaN and infinities reach the logits; the mean over no kept rows is 0 / 0."""
    classes, lead = h.shape[-1], tuple(h.shape[1:-1])
    name = f"p{p.k}_label{len(p.built.feed)}"
    if p.aside.random() < 0.5:
        dtype = str(p.aside.choice(("int64", "int32")))
        value = p.aside.integers(0, classes, size=(p.batch, *lead, 1))
        value[p.aside.random(value.shape) < 0.2] = -100
        p.built.feed[name] = value.astype(dtype)
        label, soft = L.data(name, [-1, *lead, 1], dtype), False
    else:
        p.built.feed[name] = p.aside.uniform(0.0, 1.0, size=(p.batch, *lead, classes)).astype(p.dtype)
        label, soft = L.data(name, [-1, *lead, classes], p.dtype), True
    p.note(f"cross-entropy[{'soft' if soft else p.built.feed[name].dtype}]")
    return L.softmax_with_cross_entropy(h, label, soft_label=soft, reduction="mean")


def _first_product(p: _Piece):
    """A fed 3-D or 4-D input and its product with a parameter that every loss reaches: (input, product)."""
    rank = 4 if p.rng.random() < 0.4 else 3
    shape = (int(p.rng.integers(1, 4)), 4, 4) if rank == 4 else (int(p.rng.integers(1, 4)), int(p.rng.integers(1, 5)))
    x = p.data(shape)
    _without_large_magnitudes(p, x)
    return x, L.matmul(x, p.param((shape[-1], shape[-1])))


def _float_piece(p: _Piece) -> None:
    x, first = _first_product(p)
    h = first
    values = [x, h]
    for _ in range(int(p.rng.integers(2, 6))):
        h = p.rng.choice(STEPS)(p, h)
        values.append(h)
    loss = L.reduce_mean(L.square(h)) if p.rng.random() < 0.5 else L.reduce_sum(h)
    if p.aside.random() < CROSS_ENTROPY_SHARE:
        loss = _cross_entropy(p, h)
    loss = loss + L.reduce_sum(first) * 0.5
    params_grads = append_backward(loss)
    # SGD or momentum: Adam's first step is lr * sign(gradient), so a gradient that is 0 in exact arithmetic
    # (a conv bias before batch norm) steps by +-lr on its rounding noise, whichever engine computes it.
    update = optimizer.SGD(0.01) if p.rng.random() < 0.5 else optimizer.Momentum(0.01, 0.9)
    update.apply_gradients(params_grads)
    p.note(type(update).__name__)
    p.built.fetch += [v.name for v in values] + [loss.name]
    p.built.fetch += [g.name for _, g in params_grads] + [w.name for w, _ in params_grads]


def _int_piece(p: _Piece) -> None:
    """Exact integer arithmetic in the declared dtype, comparisons, and true division into floats."""
    n = int(p.rng.integers(1, 6))
    names = []
    for _ in range(2):
        name = f"p{p.k}_i{len(p.built.feed)}"
        value = p.rng.integers(-50, 50, size=(p.batch, n)).astype(p.dtype)
        value[value == 0] = 3
        p.built.feed[name] = value
        names.append(L.data(name, [-1, n], p.dtype))
    a, b = names
    made = [a + b, a - b, a * b, L.abs(a), L.scale(a, 3.0, 2.0), L.reduce_sum(a, dim=[1]), L.less_than(a, b),
            L.maximum(a, b), L.remainder(a, b), L.divide(a, b), L.cast(a, "float64") / L.cast(b, "float64")]
    p.note("int arithmetic, compare, remainder, true division")
    p.built.fetch += [v.name for v in made]


def _aside(seed: int, k: int) -> np.random.Generator:
    """Piece ``k``'s own stream beside ``seed``'s (a spawn key: ``default_rng((seed, 0))`` would be
    ``default_rng(seed)`` itself, trailing zeros not counting)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))


def build(seed: int, pieces: int) -> Built:
    """A program of ``pieces`` random pieces, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    built = Built(Program(), Program())
    with program_guard(built.main, built.startup):
        for k in range(pieces):
            integer = rng.random() < 0.15
            dtype = str(rng.choice(("int32", "int64"))) if integer else str(rng.choice(("float32", "float64")))
            batch = int(rng.choice((0, 1, 2, 3)))
            p = _Piece(rng, k, built, dtype, batch, aside=_aside(seed, k))
            (_int_piece if integer else _float_piece)(p)
            built.described.append(f"piece {k} ({dtype}, batch {batch}): {', '.join(p.steps)}")
    return built


def build_second_order(seed: int, skip: tuple = ()) -> Built | None:
    """One float chain of ``STEPS`` (but those in ``skip``), the gradient of its loss with respect to its
    parameters, and the gradient of the sum of that gradient's squares: every step's grad ops differentiated in
    turn. None where no parameter reaches the loss."""
    rng = np.random.default_rng(seed)
    built = Built(Program(), Program())
    with program_guard(built.main, built.startup):
        dtype, batch = str(rng.choice(("float32", "float64"))), int(rng.choice((0, 1, 2, 3)))
        p = _Piece(rng, 0, built, dtype, batch, aside=_aside(seed, 0))
        _, h = _first_product(p)
        steps = [step for step in STEPS if step not in skip]
        for _ in range(int(rng.integers(1, 4))):
            h = steps[int(rng.integers(len(steps)))](p, h)
        loss = L.reduce_mean(L.square(h))
        params = [built.main.global_block().var(name) for name in built.params]
        first = [g for g in gradients([loss], params) if g is not None]
        if not first:
            return None
        squares = [L.reduce_sum(L.square(g)) for g in first]
        second = [g for g in gradients([L.sum(squares) if len(squares) > 1 else squares[0]], params) if g is not None]
        built.fetch += [loss.name] + [g.name for g in first + second]
        built.described.append(f"second order ({dtype}, batch {batch}): {', '.join(p.steps)}")
    return built
