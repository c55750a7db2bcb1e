"""Lowerings of the ops that move, regroup, select or index elements (``backend/numpy/kernels/manipulation.py``,
``indexing.py``, ``logic.py``, ``grad_ops.py``, ``network.py``), computing what those kernels compute.

Where numpy raises on an index out of range, XLA would clamp: each such lowering wraps negative indexes as
numpy does and states the range with ``ctx.check``, so the run fails naming the op, as on numpy.

Training ``dropout`` draws its masks on the host from the numpy kernel's stream (``_dropout``).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from gradgen.program.shapes import unsqueezed

from ..numpy.kernels.grad_ops import slice_index
from .lower_math import out_dtype

__all__ = ["LOWERINGS", "from_end", "in_bounds", "op_axis", "scatter_rows", "take_rows"]


def _rank(op, slot: str = "X") -> int:
    return len(op.block.var(op.input(slot)[0]).shape)


def op_axis(op, slot: str = "X") -> int:
    """The ``axis`` attr normalized against the rank of the slot's first var (0 for a scalar), as the kernels."""
    rank = _rank(op, slot)
    return op.attr("axis") % rank if rank else 0


def in_bounds(index, size: int):
    """Whether every entry of ``index`` is in ``[-size, size)`` (numpy raises IndexError outside it)."""
    return jnp.all((index >= -size) & (index < size))


def from_end(index, size: int):
    """``index`` with negative entries counted from the end (numpy's reading)."""
    return jnp.where(index < 0, index + size, index)


def _in_range(ctx, index, size: int, what: str):
    """``from_end(index)``, after checking it is ``in_bounds`` (a run-time check)."""
    ctx.check(in_bounds(index, size), f"{what}: an index is out of bounds for an axis of size {size} (IndexError "
                                      "in numpy)")
    return from_end(index, size)


def take_rows(x, index, axis: int):
    """``take(x, index, axis)`` of in-range indexes. From an empty axis (where every index failed its check, or
    none is read) it gives zeros of the right shape: a loop body that never runs is traced all the same."""
    if x.shape[axis] == 0:
        return jnp.zeros(x.shape[:axis] + jnp.shape(index) + x.shape[axis + 1:], x.dtype)
    return jnp.take(x, index, axis=axis, mode="clip")


# -- reshaping and reordering -------------------------------------------------------------------------------


def _reshape(op, ctx):
    target = tuple(op.attr("shape"))

    def run(x):  # 0 copies the input's dim at its position; one -1 is inferred
        return jnp.reshape(x, tuple(x.shape[i] if d == 0 else d for i, d in enumerate(target)))

    return run


def _reshape_as(op, ctx):
    return lambda x, target: jnp.reshape(x, target.shape)


def _transpose(op, ctx):
    perm = tuple(op.attr("perm"))
    return lambda x: jnp.transpose(x, perm)


def _squeeze(op, ctx):
    axes = tuple(op.attr("axes"))
    if not axes:
        return lambda x: jnp.reshape(x, tuple(d for d in x.shape if d != 1))
    rank = _rank(op)
    drop = tuple(sorted({a % rank for a in axes}))
    return lambda x: jnp.squeeze(x, axis=drop)  # refuses a named axis whose size is not 1, as numpy


def _unsqueeze(op, ctx):
    axes = op.attr("axes")
    return lambda x: jnp.reshape(x, unsqueezed(x.shape, axes))


def _concat(op, ctx):
    axis, dtype = op_axis(op), out_dtype(op)

    def run(*xs):
        if any(jnp.ndim(x) == 0 for x in xs):
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        return jnp.concatenate(xs, axis=axis).astype(dtype)

    return run


def _stack(op, ctx):
    axis, dtype = op.attr("axis"), out_dtype(op)
    return lambda *xs: jnp.stack(xs, axis=axis).astype(dtype)


def _pieces(x, axis: int, sizes):
    """``x`` cut along ``axis`` into consecutive pieces of ``sizes`` (the last taking the rest), one value if
    there is a single piece."""
    lead, bounds = (slice(None),) * (axis % x.ndim), np.cumsum([0, *sizes])
    stops = [*bounds[1:-1], None]
    pieces = [x[lead + (slice(int(a), None if b is None else int(b)),)] for a, b in zip(bounds[:-1], stops)]
    return pieces[0] if len(pieces) == 1 else tuple(pieces)


def _split(op, ctx):
    axis, sections = op_axis(op), list(op.attr("sections"))

    def run(x):
        size, sizes = x.shape[axis], list(sections)
        if -1 in sizes:
            sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
        if sum(sizes) != size or min(sizes) < 0:
            raise ValueError(f"sections {sections} do not add up to size {size} of axis {axis}")
        return _pieces(x, axis, sizes)

    return run


def _split_like(op, ctx):
    axis = op.attr("axis")
    return lambda x, *likes: _pieces(x, axis, [t.shape[axis] for t in likes])


def _slice(op, ctx):
    index = slice_index((0,) * _rank(op), op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides"))
    return lambda x: x[index]  # static bounds, clamped as python slicing clamps them


def _slice_grad(op, ctx):
    axes, starts, ends, strides = op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("strides")

    def run(x, dout):
        return jnp.zeros(x.shape, dout.dtype).at[slice_index(x.shape, axes, starts, ends, strides)].set(dout)

    return run


def _pad(op, ctx):
    pads, value = op.attr("paddings"), op.attr("pad_value")
    widths = tuple((pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2))
    if not widths:
        return lambda x: x
    if min(min(w) for w in widths) < 0:
        raise ValueError(f"index can't contain negative values (paddings {pads})")
    return lambda x: jnp.pad(x, widths, constant_values=jnp.asarray(value).astype(x.dtype))


def _broadcast_to(op, ctx):
    if op.input("ShapeLike"):
        return lambda x, like: jnp.broadcast_to(x, like.shape)
    shape = tuple(op.attr("shape"))
    return lambda x: jnp.broadcast_to(x, shape)


def _cumsum(op, ctx):
    axis, exclusive, reverse = op.attr("axis"), op.attr("exclusive"), op.attr("reverse")

    def run(x):
        ax = axis % x.ndim
        y = jnp.flip(x, ax) if reverse else x
        if exclusive:  # 0, then the running sums without the last element
            lead = (slice(None),) * ax
            head = jnp.zeros(y.shape[:ax] + (min(1, y.shape[ax]),) + y.shape[ax + 1:], y.dtype)
            out = jnp.concatenate([head, jnp.cumsum(y[lead + (slice(0, -1),)], axis=ax, dtype=y.dtype)], axis=ax)
        else:
            out = jnp.cumsum(y, axis=ax, dtype=y.dtype)
        return jnp.flip(out, ax) if reverse else out

    return run


# -- selecting ----------------------------------------------------------------------------------------------


def _where(op, ctx):
    dtype = out_dtype(op)
    return lambda cond, x, y: jnp.where(cond, x, y).astype(dtype)


def _arg_extreme(pick):
    def factory(op, ctx):
        rank = _rank(op)
        axis, keep = op.attr("axis") % max(rank, 1), op.attr("keep_dim")

        def run(x):
            if x.ndim == 0:  # numpy's argmax of a scalar along axis 0 is 0
                out = jnp.zeros((), np.int64)
            else:
                out = pick(x, axis=axis).astype(np.int64)  # the first index on ties, as numpy
            return jnp.expand_dims(out, axis) if keep and x.ndim else out  # a scalar has no dim to keep

        return run

    return factory


def _one_hot(op, ctx):
    depth, dtype = op.attr("depth"), np.dtype(op.attr("dtype"))
    return lambda x: (jnp.expand_dims(x, -1) == jnp.arange(depth)).astype(dtype)  # out-of-range ids: zero rows


def _top_k(op, ctx):
    k, axis, largest = op.attr("k"), op.attr("axis"), op.attr("largest")

    def run(x):
        ax = axis % x.ndim
        n = x.shape[ax]
        if k > n:
            raise ValueError(f"top_k: k={k} is more than the size {n} of axis {ax}")
        if largest:  # descending with ties in index order: a stable sort of the reversed axis, reversed back
            order = n - 1 - jnp.flip(jnp.argsort(jnp.flip(x, ax), axis=ax, stable=True), ax)
        else:
            order = jnp.argsort(x, axis=ax, stable=True)
        indices = jax.lax.slice_in_dim(order, 0, k, axis=ax).astype(np.int64)
        return jnp.take_along_axis(x, indices, ax), indices

    return run


# -- reading and writing at indexes -------------------------------------------------------------------------


def scatter_rows(base, index, updates, axis: int, add: bool):
    """``base`` with ``updates`` put, or added, at the in-range ``index`` along ``axis``; ``updates`` shaped like
    ``take(base, index, axis)`` (as ``backend/numpy/kernels/indexing.scatter_rows``)."""
    ax = axis % base.ndim
    rows = jnp.reshape(updates, base.shape[:ax] + (index.size,) + base.shape[ax + 1:])
    moved, rows, flat = jnp.moveaxis(base, ax, 0), jnp.moveaxis(rows, ax, 0), jnp.reshape(index, -1)
    moved = moved.at[flat].add(rows) if add else moved.at[flat].set(rows)
    return jnp.moveaxis(moved, 0, ax)


def _gather(op, ctx):
    axis = op_axis(op)

    def run(x, index):
        return take_rows(x, _in_range(ctx, index, x.shape[axis], "gather"), axis)

    return run


def _gather_grad(op, ctx):
    axis = op.attr("axis")

    def run(x, index, dout):
        index = _in_range(ctx, index, x.shape[axis % x.ndim], "gather_grad")
        return scatter_rows(jnp.zeros(x.shape, dout.dtype), index, dout, axis, add=True)

    return run


def _scatter(op, ctx):
    axis = op.attr("axis")

    def run(x, index, updates):
        size = x.shape[axis % x.ndim]
        index = _in_range(ctx, index, size, "scatter")
        flat = jnp.sort(jnp.reshape(index, -1))
        ctx.check(jnp.all(flat[1:] != flat[:-1]), f"scatter: Index names a position of axis {axis} more than once "
                                                   "(use scatter_add to add repeated updates)")
        return scatter_rows(x, index, updates, axis, add=False)

    return run


def _scatter_add(op, ctx):
    axis = op.attr("axis")

    def run(x, index, updates):
        index = _in_range(ctx, index, x.shape[axis % x.ndim], "scatter_add")
        return scatter_rows(x, index, updates, axis, add=True)

    return run


def _take_along_axis(op, ctx):
    axis = op.attr("axis")

    def run(x, index):
        ax = axis % x.ndim
        index = _in_range(ctx, index.astype(np.int64), x.shape[ax], "take_along_axis")
        if x.shape[ax] == 0:  # as take_rows
            return jnp.zeros(jnp.broadcast_shapes(x.shape[:ax] + (1,) + x.shape[ax + 1:], index.shape), x.dtype)
        return jnp.take_along_axis(x, index, ax, mode="clip")

    return run


def _take_along_axis_grad(op, ctx):
    axis = op.attr("axis")

    def run(x, index, dout):
        ax = axis % x.ndim
        if any(i != ax and n > x.shape[i] for i, n in enumerate(index.shape)):
            raise ValueError(f"Index {list(index.shape)} is larger than X {list(x.shape)} off axis {ax}")
        where = [jax.lax.broadcasted_iota(np.int64, index.shape, d) for d in range(index.ndim)]
        where[ax] = _in_range(ctx, index.astype(np.int64), x.shape[ax], "take_along_axis_grad")
        return jnp.zeros(x.shape, dout.dtype).at[tuple(where)].add(dout)  # each other dim indexes itself

    return run


def _lookup_table(op, ctx):
    def run(w, ids):
        ctx.check(jnp.all((ids >= 0) & (ids < w.shape[0])), f"an id is outside [0, {w.shape[0]})")
        return take_rows(w, ids, 0)

    return run


# -- dropout ------------------------------------------------------------------------------------------------


def _dropout(op, ctx):
    """In inference (or with p 0) the identity and a mask of ones. In training, the mask is drawn on the host,
    once per run, from a PCG64 stream seeded as the numpy kernel's (``backend/numpy/kernels/network.py``), so the
    masks are the numpy backend's, run after run (XLA's own generators could not give them). The draw is an
    ``io_callback``: a side effect XLA neither drops nor repeats.

    The numpy backend keeps one stream per plan, whatever the run-time shapes: so does this, in
    ``ctx.host_state`` (kept across the compiled block's traces, keyed by the op)."""
    p, is_test = op.attr("p"), op.attr("is_test")
    if is_test or p == 0.0:
        return lambda x: (x, jnp.ones_like(x))
    rng = ctx.host_state.setdefault(("dropout", ctx.where), np.random.Generator(np.random.PCG64(op.attr("seed"))))

    def run(x):
        dtype = np.dtype(x.dtype)

        def draw():
            return ((rng.random(x.shape) >= p) / (1.0 - p)).astype(dtype)

        mask = io_callback(draw, jax.ShapeDtypeStruct(x.shape, dtype))
        return x * mask, mask

    return run


def _flatten(op, ctx):
    rank = len(op.block.var(op.input("X")[0]).shape)
    axis = op.attr("axis") + rank if op.attr("axis") < 0 else op.attr("axis")
    return lambda x: jnp.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


def _triangle(fn):
    """tril/triu: the last two dims of any batch masked at the op's ``diagonal``."""
    return lambda op, ctx: (lambda x, k=op.attr("diagonal"): fn(x, k))


def stable_order(x, ax: int, descending: bool):
    """The int64 positions that sort ``x`` along ``ax``, equal values in their order both ways (NaN last), as
    ``backend/numpy/kernels/indexing.stable_order``."""
    if descending:
        order = x.shape[ax] - 1 - jnp.flip(jnp.argsort(jnp.flip(x, ax), axis=ax, stable=True), ax)
    else:
        order = jnp.argsort(x, axis=ax, stable=True)
    return order.astype(jnp.int64)


def _sort(op, ctx):
    axis, descending = op.attr("axis"), op.attr("descending")

    def run(x):
        order = stable_order(x, axis % x.ndim, descending)
        return jnp.take_along_axis(x, order, axis % x.ndim), order

    return run


def _argsort(op, ctx):
    axis, descending = op.attr("axis"), op.attr("descending")
    return lambda x: stable_order(x, axis % x.ndim, descending)


LOWERINGS = {
    "flatten": _flatten, "tril": _triangle(jnp.tril), "triu": _triangle(jnp.triu), "sort": _sort,
    "argsort": _argsort,
    "reshape": _reshape, "reshape_as": _reshape_as, "transpose": _transpose, "squeeze": _squeeze,
    "unsqueeze": _unsqueeze, "concat": _concat, "stack": _stack, "split": _split, "split_like": _split_like,
    "slice": _slice, "slice_grad": _slice_grad, "pad": _pad, "broadcast_to": _broadcast_to, "cumsum": _cumsum,
    "where": _where, "argmax": _arg_extreme(jnp.argmax), "argmin": _arg_extreme(jnp.argmin), "one_hot": _one_hot,
    "top_k": _top_k,
    "gather": _gather, "gather_grad": _gather_grad, "scatter": _scatter, "scatter_add": _scatter_add,
    "take_along_axis": _take_along_axis, "take_along_axis_grad": _take_along_axis_grad,
    "lookup_table": _lookup_table, "dropout": _dropout,
}
