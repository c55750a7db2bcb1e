"""Lowerings of the reduction and creation ops, the products and the casts: ``jax.numpy`` one-liners that compute
what the numpy kernels compute (``backend/numpy/kernels/``), in the same dtypes. The elementwise, activation,
comparison and logical ops state their math once (``program/ops``) and are derived (``lower_derived``).

Random ops have no inputs and a fixed seed: every run draws the same numbers, so they are constants, made
with the numpy kernel (PCG64) while tracing: the same values as the numpy backend, bit for bit.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from gradgen.program.einsum_equation import parse_einsum

from ..numpy.kernels import KERNELS as NUMPY_KERNELS
from ..numpy.kernels.creation import random_sample, random_stream
from ..numpy.kernels.manipulation import summed_to_shape

__all__ = ["LOWERINGS", "axes_of", "in_dtype", "out_dtype"]


def in_dtype(op, slot: str = "X", k: int = 0) -> np.dtype:
    return np.dtype(op.block.var(op.input(slot)[k]).dtype)


def out_dtype(op, slot: str = "Out", k: int = 0) -> np.dtype:
    return np.dtype(op.block.var(op.output(slot)[k]).dtype)


def axes_of(op, rank: int):
    """The reduction's axes (None: all), as the numpy kernels read ``dim`` and ``reduce_all``."""
    dim = op.attr("dim")
    if op.attr("reduce_all") or not dim:
        return None
    return tuple(d % rank for d in dim)


def _fixed(fn):
    return lambda op, ctx: fn





def _logsumexp(op, ctx):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis, keep = axes_of(op, rank), op.attr("keep_dim")

    def run(x):
        top = jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)
        top = jnp.where(jnp.isfinite(top), top, 0.0).astype(x.dtype)
        out = jnp.log(jnp.sum(jnp.exp(x - top), axis=axis, keepdims=True)) + top
        return (out if keep else jnp.squeeze(out, axis=axis)).astype(x.dtype)

    return run


def _prod_others(op, ctx):
    """The product of every other element of each reduced slice, by exclusive running products from both ends
    (no division: zeros are exact), as the numpy kernel."""
    rank = len(op.block.var(op.input("X")[0]).shape)
    axes = axes_of(op, rank)
    axes = list(range(rank)) if axes is None else sorted(axes)
    kept = [a for a in range(rank) if a not in axes]
    back = tuple(int(i) for i in np.argsort(kept + axes))

    def exclusive(flat):
        ones = jnp.ones(flat.shape[:-1] + (1,), flat.dtype)
        return jnp.cumprod(jnp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=flat.dtype)

    def run(x):
        moved = jnp.transpose(x, kept + axes)
        size = math.prod(x.shape[a] for a in axes)
        if size == 0:
            return jnp.zeros_like(x)
        flat = moved.reshape(moved.shape[:len(kept)] + (size,))
        others = exclusive(flat) * jnp.flip(exclusive(jnp.flip(flat, -1)), -1)
        return jnp.transpose(others.reshape(moved.shape), back)

    return run




def _fill_constant(op, ctx):
    shape, dtype, value = tuple(op.attr("shape")), op.attr("dtype"), op.attr("value")
    return lambda: jnp.full(shape, value, dtype=dtype)


def _like_dtype(op):
    return op.attr("dtype") or op.block.var(op.input("X")[0]).dtype


def _fill_any_like(op, ctx):
    value, dtype = op.attr("value"), _like_dtype(op)
    return lambda x: jnp.full(x.shape, value, dtype=dtype)


def _fill_zeros_like(op, ctx):
    dtype = _like_dtype(op)
    return lambda x: jnp.zeros(x.shape, dtype=dtype)


def _random_draw(op, ctx):
    """A seeded random op outside block 0 (block 0's come in as host inputs: ``compile.HOST_COMPUTED``). Without
    ``redraw`` every run gives the same array: the numpy kernel's, made while tracing, as a constant. With it,
    each execution draws on the host from the numpy kernel's stream, one per compiled block as the numpy backend
    keeps one per plan (``ctx.host_state``), through an ``io_callback`` XLA neither drops nor repeats."""
    if not op.attr("redraw"):
        value = np.asarray(NUMPY_KERNELS[op.type](op)())
        return lambda: jnp.asarray(value)
    stream = ctx.host_state.setdefault(("random", ctx.where), random_stream(op))  # restored on a re-run
    shape, dtype = tuple(op.attr("shape")), np.dtype(op.attr("dtype"))
    return lambda: io_callback(lambda: random_sample(op, stream), jax.ShapeDtypeStruct(shape, dtype))


def _cast(op, ctx):
    dtype = np.dtype(op.attr("out_dtype"))
    return lambda x: x.astype(dtype)


def _increment(op, ctx):
    step, dtype = op.attr("step"), out_dtype(op)
    return lambda x: (x + step).astype(dtype)


def _sum(op, ctx):
    dtype = out_dtype(op)

    def run(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return jnp.asarray(total).astype(dtype)

    return run


def _matmul(op, ctx):
    """numpy's matmul with the op's transposes (a 1-D operand is never transposed), in full precision."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")
    dtype = out_dtype(op)

    def run(x, y):
        a = jnp.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
        b = jnp.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST).astype(dtype)

    return run


def _einsum(op, ctx):
    """numpy's einsum on the equation with its ellipsis spelled out (``program/einsum_equation.py``)."""
    ranks = [len(op.block.var(n).shape) for n in op.input("Operands")]
    equation, dtype = parse_einsum(op.attr("equation"), ranks).text(), out_dtype(op)
    return lambda *xs: jnp.einsum(equation, *xs, precision=jax.lax.Precision.HIGHEST).astype(dtype)


def _mod(op, ctx):
    """numpy's remainder (floor, the divisor's sign) or, with ``fmod``, its truncated one; an integer remainder
    by zero fails the run, as the numpy kernel refuses it."""
    fn, dtype = (jnp.fmod if op.attr("fmod") else jnp.remainder), out_dtype(op)
    integer = in_dtype(op, "Y").kind in "iu"

    def run(x, y):
        if integer:
            ctx.check(jnp.all(y != 0), "ZeroDivisionError: integer remainder by zero")
            y = jnp.where(y == 0, jnp.ones((), y.dtype), y)  # the run fails; keep XLA's result defined meanwhile
        return fn(x, y).astype(dtype)

    return run


def _reduce_as(op, ctx):
    return lambda x, target: summed_to_shape(x, target.shape)


LOWERINGS = {
    "logsumexp": _logsumexp, "prod_others": _prod_others, "sum": _sum,
    "fill_constant": _fill_constant, "fill_any_like": _fill_any_like, "fill_zeros_like": _fill_zeros_like,
    "uniform_random": _random_draw, "gaussian_random": _random_draw,
    "assign": _fixed(lambda x: x), "cast": _cast, "increment": _increment,
    "matmul": _matmul, "reduce_as": _reduce_as, "einsum": _einsum, "elementwise_mod": _mod,
}
