"""Ops that move, copy or regroup elements without arithmetic (plus n-ary sum)."""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from functools import reduce
from operator import add

from ..dtypes import DTYPES, INT_DTYPES, NUMERIC_DTYPES, unrepresentable
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import broadcast_shapes, normalize_axes, normalize_axis, numel, shapes_agree, unsqueezed


def _same_types(ctx) -> TensorType:
    """The common type of every var in slot X (known dims win over -1); fails if two differ."""
    xs = ctx.inputs("X")
    first = xs[0]
    for t in xs[1:]:
        if t.dtype != first.dtype or not shapes_agree(t.shape, first.shape):
            ctx.fail(f"every input must have the same shape and dtype: {first.dtype}{list(first.shape)} "
                     f"vs {t.dtype}{list(t.shape)}")
    shape = tuple(next((d for d in ds if d != -1), -1) for ds in zip(*(t.shape for t in xs)))
    return TensorType(shape, first.dtype)


def _sum(ctx):
    return {"Out": _same_types(ctx)}


def _reduce_as(ctx):
    x, target = ctx.input("X"), ctx.input("Target")
    if len(target.shape) > len(x.shape):
        ctx.fail(f"Target has rank {len(target.shape)}, more than X's {len(x.shape)}")
    broadcast_shapes(x.shape, target.shape)
    return {"Out": TensorType(target.shape, x.dtype)}


def _broadcast_to(ctx):
    x = ctx.input("X")
    shape = ctx.input("ShapeLike").shape if ctx.has_input("ShapeLike") else tuple(ctx.attr("shape"))
    if len(shape) < len(x.shape):
        ctx.fail(f"cannot broadcast rank {len(x.shape)} to rank {len(shape)}")
    out = broadcast_shapes(x.shape, shape)
    if not shapes_agree(out, shape):
        ctx.fail(f"cannot broadcast {list(x.shape)} to {list(shape)}")
    return {"Out": TensorType(tuple(shape), x.dtype)}


def _reshape(ctx):
    x, target = ctx.input("X"), list(ctx.attr("shape"))
    if target.count(-1) > 1:
        ctx.fail(f"shape {target} has more than one -1")
    if any(d < -1 for d in target):
        ctx.fail(f"shape {target} has a negative size other than -1")
    shape = []
    for i, d in enumerate(target):
        if d == 0:
            if i >= len(x.shape):
                ctx.fail(f"shape {target}: 0 at position {i} copies a dim X (rank {len(x.shape)}) does not have")
            d = x.shape[i]
        shape.append(d)
    total, known = numel(x.shape), numel([d for d in shape if d != -1])
    if -1 in shape:
        if total >= 0 and known > 0:
            if total % known:
                ctx.fail(f"cannot reshape {list(x.shape)} ({total} elements) to {target}")
            shape[shape.index(-1)] = total // known
    elif total >= 0 and -1 not in shape and numel(shape) != total:
        ctx.fail(f"cannot reshape {list(x.shape)} ({total} elements) to {target} ({numel(shape)} elements)")
    return {"Out": TensorType(tuple(shape), x.dtype)}


def _transpose(ctx):
    x, perm = ctx.input("X"), list(ctx.attr("perm"))
    if sorted(normalize_axes(perm, len(x.shape))) != list(range(len(x.shape))):
        ctx.fail(f"perm {perm} is not a permutation of the {len(x.shape)} dims of X")
    perm = normalize_axes(perm, len(x.shape))
    return {"Out": TensorType(tuple(x.shape[p] for p in perm), x.dtype)}


def _concat(ctx):
    xs = ctx.inputs("X")
    first = xs[0]
    if any(not t.shape for t in xs):
        ctx.fail("inputs must have rank >= 1 (a scalar has no axis to join along)")
    axis = normalize_axis(ctx.attr("axis"), len(first.shape))
    size = 0
    for t in xs:
        if t.dtype != first.dtype or len(t.shape) != len(first.shape) or not shapes_agree(
                [d for i, d in enumerate(t.shape) if i != axis], [d for i, d in enumerate(first.shape) if i != axis]):
            ctx.fail(f"inputs must agree except on axis {axis}: {first.dtype}{list(first.shape)} vs "
                     f"{t.dtype}{list(t.shape)}")
        size = -1 if size == -1 or t.shape[axis] == -1 else size + t.shape[axis]
    shape = list(first.shape)
    shape[axis] = size
    return {"Out": TensorType(tuple(shape), first.dtype)}


def _split(ctx):
    x, sections = ctx.input("X"), list(ctx.attr("sections"))
    if not x.shape:
        ctx.fail("X must have rank >= 1 (a scalar has no axis to split along)")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    size = x.shape[axis]
    if not sections or sections.count(-1) > 1 or any(s < -1 for s in sections):
        ctx.fail(f"sections {sections} must be sizes >= 0, with at most one -1 (the rest of the axis)")
    known = sum(s for s in sections if s != -1)
    if size >= 0 and -1 not in sections and known != size:
        ctx.fail(f"sections {sections} add up to {known}, but axis {axis} of X has size {size}")
    if size >= 0 and -1 in sections:
        if known > size:
            ctx.fail(f"sections {sections} need at least {known} along axis {axis}, but X has size {size}")
        sections[sections.index(-1)] = size - known
    outs = []
    for s in sections:
        shape = list(x.shape)
        shape[axis] = s
        outs.append(TensorType(tuple(shape), x.dtype))
    return {"Out": outs}


def slice_strides(ctx) -> list[int]:
    """The slice's strides: one per axis (1 each when the attr is empty); zero is rejected."""
    strides = list(ctx.attr("strides")) or [1] * len(ctx.attr("axes"))
    if len(strides) != len(ctx.attr("axes")) or 0 in strides:
        ctx.fail(f"strides {strides} must be non-zero, one per axis {list(ctx.attr('axes'))}")
    return strides


def _slice(ctx):
    x = ctx.input("X")
    axes, starts, ends = ctx.attr("axes"), ctx.attr("starts"), ctx.attr("ends")
    if not len(axes) == len(starts) == len(ends):
        ctx.fail(f"axes, starts and ends differ in length: {axes}, {starts}, {ends}")
    shape = list(x.shape)
    if axes and not shape:
        ctx.fail(f"X is a scalar (rank 0): it has no axis {axes[0]} to slice")
    for a, s, e, st in zip(normalize_axes(axes, len(shape)), starts, ends, slice_strides(ctx)):
        if shape[a] >= 0:
            shape[a] = len(range(*slice(s, e, st).indices(shape[a])))
    return {"Out": TensorType(tuple(shape), x.dtype)}


def _pad(ctx):
    x, pads = ctx.input("X"), list(ctx.attr("paddings"))
    if len(pads) != 2 * len(x.shape) or min(pads, default=0) < 0:
        ctx.fail(f"paddings {pads} must be 2 x rank = {2 * len(x.shape)} non-negative ints (before, after per dim)")
    problem = unrepresentable(ctx.attr("pad_value"), x.dtype)
    if problem:
        ctx.fail(f"pad_value {problem}: X is {x.dtype} and Out has X's dtype")
    shape = tuple(-1 if d < 0 else d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x.shape))
    return {"Out": TensorType(shape, x.dtype)}


def _cumsum(ctx):
    x = ctx.input("X")
    if len(x.shape) == 0:
        ctx.fail(f"cumsum needs X of rank >= 1, got {x.dtype}{list(x.shape)}")
    normalize_axis(ctx.attr("axis"), len(x.shape))
    return {"Out": x}


def cumsum(xp, x, *, axis: int, exclusive: bool, reverse: bool):
    """Running sums along ``axis`` in X's dtype (numpy's default would sum int32 in int64), from the end when
    ``reverse``. ``exclusive``: 0, then the running sums of all but the last element (not the inclusive sums
    minus X, which would round, and give NaN after an infinity)."""
    axis %= x.ndim
    y = xp.flip(x, axis=axis) if reverse else x
    if exclusive:
        lead = (slice(None),) * axis
        out = xp.concat([xp.zeros_like(y[lead + (slice(0, 1),)]),  # an empty axis stays empty
                         xp.cumsum(y[lead + (slice(0, -1),)], axis=axis, dtype=y.dtype)], axis=axis)
    else:
        out = xp.cumsum(y, axis=axis, dtype=y.dtype)
    return xp.flip(out, axis=axis) if reverse else out


def _squeeze(ctx):
    x = ctx.input("X")
    if ctx.attr("axes") and not x.shape:
        ctx.fail(f"X is a scalar (rank 0): it has no axis {ctx.attr('axes')[0]} to squeeze")
    axes = set(normalize_axes(ctx.attr("axes"), len(x.shape)))
    if not axes:
        if -1 in x.shape:
            ctx.fail(f"squeeze with no axes needs X's shape known, got {list(x.shape)}")
        return {"Out": TensorType(tuple(d for d in x.shape if d != 1), x.dtype)}
    for a in axes:
        if x.shape[a] not in (1, -1):
            ctx.fail(f"axis {a} of X has size {x.shape[a]}, not 1")
    return {"Out": TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)}


def _unsqueeze(ctx):
    x = ctx.input("X")
    return {"Out": TensorType(unsqueezed(x.shape, ctx.attr("axes")), x.dtype)}


def _stack(ctx):
    common = _same_types(ctx)
    shape = list(common.shape)
    shape.insert(normalize_axis(ctx.attr("axis"), len(shape) + 1), len(ctx.inputs("X")))
    return {"Out": TensorType(tuple(shape), common.dtype)}


def _gather(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    axis = normalize_axis(ctx.attr("axis"), len(x.shape))
    return {"Out": TensorType(tuple(x.shape[:axis]) + tuple(index.shape) + tuple(x.shape[axis + 1:]), x.dtype)}


def _flatten(ctx):
    """ONNX Flatten: the dims before ``axis`` make the rows, the rest the columns (axis may equal the rank)."""
    x, axis = ctx.input("X"), ctx.attr("axis")
    if not -len(x.shape) <= axis <= len(x.shape):
        ctx.fail(f"axis {axis} is out of range for X of rank {len(x.shape)} (0 to rank, or negative)")
    axis = axis + len(x.shape) if axis < 0 else axis
    return {"Out": TensorType((numel(x.shape[:axis]), numel(x.shape[axis:])), x.dtype)}


# -- the math, over an engine's array namespace ``xp`` (``OpSchema.compute``) --------------------------------------


def _of_one_shape(xs, what: str) -> None:
    """Refuse inputs whose run-time shapes differ: the schema's promise, which numpy would break by broadcasting
    -1 dims that meet at run time as 1 and n."""
    if any(x.shape != xs[0].shape for x in xs[1:]):
        raise ValueError(f"the {what} have run-time shapes {[list(x.shape) for x in xs]}, not one shape")


def sum_(xp, *xs):
    """X[0] + X[1] + ..., added left to right in their dtype: the accumulation of a var's gradients."""
    _of_one_shape(xs, "addends")
    return reduce(add, xs)


def reduce_as(xp, x, target):
    """X summed over the dims broadcasting added to reach Target's run-time shape (the leading ones, then those
    Target has as 1), in X's dtype (numpy would sum int32 in int64): the adjoint of broadcasting."""
    lead = x.ndim - target.ndim
    if lead:
        x = xp.sum(x, axis=tuple(range(lead)), dtype=x.dtype)
    ones = tuple(i for i, d in enumerate(target.shape) if d == 1 and x.shape[i] != 1)
    return xp.sum(x, axis=ones, keepdims=True, dtype=x.dtype) if ones else x


def broadcast_to(xp, x, like, *, shape: Sequence[int]):
    """X broadcast to ShapeLike's run-time shape where given, else to the attr's."""
    return xp.broadcast_to(x, tuple(like.shape if like is not None else shape))


def squeeze(xp, x, *, axes: Sequence[int]):
    """X without the dims ``axes`` names (every size-1 dim when it names none); a named dim must have size 1."""
    drop = {a % x.ndim for a in axes} if axes else {i for i, d in enumerate(x.shape) if d == 1}
    if any(x.shape[a] != 1 for a in drop):
        raise ValueError(f"cannot squeeze axes {sorted(drop)} of shape {list(x.shape)}: not of size 1")
    return xp.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))


def unsqueeze(xp, x, *, axes: Sequence[int]):
    """X with a size-1 dim inserted at each of ``axes``, one after another."""
    return xp.reshape(x, unsqueezed(tuple(x.shape), axes))


def flatten(xp, x, *, axis: int):
    """X as a matrix: its dims before ``axis`` multiplied into the rows, the rest into the columns."""
    axis = axis + x.ndim if axis < 0 else axis
    return xp.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


def stack(xp, *xs, axis: int):
    """The inputs, of one shape, stacked along a new dim ``axis``."""
    _of_one_shape(xs, "inputs")
    return xp.stack(xs, axis=axis)


def section_sizes(sections: Sequence[int], size: int, axis: int) -> list[int]:
    """``split``'s piece sizes along an axis of ``size``: ``sections`` with its one -1 (if any) given the rest; a
    ValueError when they do not add up (a rest of -2 would "add up" and cut a piece short)."""
    sizes = list(sections)
    if -1 in sizes:
        sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
    if sum(sizes) != size or min(sizes) < 0:
        raise ValueError(f"sections {list(sections)} do not add up to size {size} of axis {axis}")
    return sizes


def cut(x, axis: int, sizes: Sequence[int]) -> list:
    """X cut along ``axis`` into consecutive pieces of ``sizes``, the last one taking the rest (numpy's split at
    the running sums): ``split``'s pieces, and ``split_like``'s."""
    lead, bounds = (slice(None),) * (axis % x.ndim), [0, *itertools.accumulate(sizes[:-1])]
    return [x[lead + (slice(a, b),)] for a, b in zip(bounds, [*bounds[1:], None])]


def split(xp, x, *, axis: int, sections: Sequence[int]) -> list:
    """X cut along ``axis`` into pieces of the sizes ``sections`` gives, one -1 among them taking the rest."""
    axis %= x.ndim
    return cut(x, axis, section_sizes(sections, x.shape[axis], axis))


def pad(xp, x, *, paddings: Sequence[int], pad_value: float):
    """X with ``paddings`` (before, after for each dim) elements of ``pad_value`` (rounded once to X's dtype)
    around it."""
    widths = list(zip(paddings[0::2], paddings[1::2]))
    return xp.pad(x, widths, constant_values=xp.asarray(pad_value, dtype=x.dtype)) if widths else x


def slice_index(shape, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
                strides: Sequence[int] = ()) -> dict[int, tuple[slice, bool]]:
    """Per axis ``slice`` cuts from an array of ``shape``, the ascending slice of the positions it takes (Python's
    clamping and negative indices) and whether it takes them backwards (a negative stride: every engine slices
    forward and flips, as torch takes no negative step)."""
    return _slice_index(tuple(shape), tuple(axes), tuple(starts), tuple(ends), tuple(strides or [1] * len(axes)))


@functools.lru_cache(maxsize=1024)
def _slice_index(shape: tuple, axes: tuple, starts: tuple, ends: tuple, strides: tuple) -> dict:
    """``slice_index``, worked out once per shape and attrs (a loop body slices at every iteration)."""
    taken = {}
    for a, s, e, st in zip(axes, starts, ends, strides):
        a %= len(shape)
        at = range(*slice(s, e, st).indices(shape[a]))
        first, last = sorted((at[0], at[-1])) if at else (0, -1)
        taken[a] = (slice(first, last + 1, abs(st)), st < 0)
    return taken


def _along(axis: int, index) -> tuple:
    """``index`` at ``axis`` of an array's index tuple, every dim before it whole."""
    return (slice(None),) * axis + (index,)


def slice_(xp, x, *, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int], strides: Sequence[int]):
    """X[starts:ends:strides] along each of ``axes``: Python's clamping, negative indices and steps."""
    for a, (at, backwards) in slice_index(x.shape, axes, starts, ends, strides).items():
        x = x[_along(a, at)]
        x = xp.flip(x, axis=a) if backwards else x
    return x


def _zeros_along(xp, like, axis: int, size: int):
    """Zeros shaped like ``like`` but for ``size`` along ``axis``."""
    return xp.zeros((*like.shape[:axis], size, *like.shape[axis + 1:]), dtype=like.dtype)


def _spread(xp, d, axis: int, step: int):
    """``d``'s rows along ``axis`` ``step`` apart, zeros between them: (m - 1) * step + 1 rows from m."""
    m = d.shape[axis]
    if step == 1 or m == 0:
        return d
    wide = xp.expand_dims(d, axis=axis + 1)  # each row, then step - 1 rows of zeros
    rows = xp.reshape(xp.concat([wide, _zeros_along(xp, wide, axis + 1, step - 1)], axis=axis + 1),
                      (*d.shape[:axis], m * step, *d.shape[axis + 1:]))
    return rows[_along(axis, slice(0, (m - 1) * step + 1))]


def slice_grad(xp, x, dout, *, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
               strides: Sequence[int]):
    """Zeros shaped like X with Out@GRAD where ``slice`` took it (``slice_``'s adjoint): along each sliced axis,
    Out@GRAD's rows in the order taken, ``stride`` apart, zeros around them."""
    for a, (at, backwards) in slice_index(x.shape, axes, starts, ends, strides).items():
        d = _spread(xp, xp.flip(dout, axis=a) if backwards else dout, a, at.step or 1)
        before, after = at.start, x.shape[a] - at.start - d.shape[a]
        dout = xp.concat([_zeros_along(xp, d, a, before), d, _zeros_along(xp, d, a, after)], axis=a)
    return dout


def _first_outside(index, size: int, what: str, axis: int) -> IndexError:
    """An IndexError naming the first entry of ``index`` (an array numpy reads) outside ``[-size, size)``."""
    import numpy as np  # a failing run's message only: the IR itself needs no numpy

    ids = np.asarray(index)
    bad = (ids < -size) | (ids >= size)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return IndexError(f"{what}: index {int(ids[where])} at {list(where)} is out of bounds for axis {axis} with size "
                      f"{size} ({int(bad.sum())} of {ids.size} indexes outside [-{size}, {size}))")


def positions(xp, index, size: int, what: str, axis: int):
    """``index`` as int64 positions in ``[0, size)``, negative ones counted from the end (numpy's reading); one
    outside ``[-size, size)`` is refused."""
    index = xp.astype(index, xp.int64, copy=False)
    xp.check(xp.all((index >= -size) & (index < size)),
             IndexError(f"{what}: an index is out of bounds for axis {axis} with size {size}"),
             detail=lambda: _first_outside(index, size, what, axis))
    return xp.where(index < 0, index + size, index)


def take(xp, x, index, axis: int):
    """numpy's ``take`` of X at the in-bounds ``index`` along ``axis``: X's dims before it, index's, X's after it.
    From an empty axis (no index reads it, or the run fails its check) zeros of that shape: a loop body that never
    runs is traced all the same."""
    if x.shape[axis] == 0:
        return xp.zeros((*x.shape[:axis], *index.shape, *x.shape[axis + 1:]), dtype=x.dtype)
    return x[_along(axis, index)]


def gather(xp, x, index, *, axis: int):
    """X's slices at Index along ``axis`` (numpy's take); a negative index counts from the end, one outside
    [-size, size) is refused."""
    axis = normalize_axis(axis, x.ndim)
    return take(xp, x, positions(xp, index, x.shape[axis], "gather", axis), axis)


def gather_grad(xp, x, index, dout, *, axis: int):
    """Zeros shaped like X with Out@GRAD's slices added at Index along ``axis``, a repeated index adding in order
    (the engine's ``xp.scatter_rows``, as ``scatter_add``'s): ``gather``'s adjoint."""
    axis = normalize_axis(axis, x.ndim)
    at = positions(xp, index, x.shape[axis], "gather_grad", axis)
    return xp.scatter_rows(xp.zeros(tuple(x.shape), dtype=dout.dtype), at, dout, axis, add=True)


TRIANGLE_DIAGONAL_BOUND = 2 ** 40
"""Beyond any matrix's size: a ``tril``/``triu`` diagonal past it masks as it does, so the compute clamps to it
(numpy overflowed on INT64_MIN, XLA wrapped INT64_MAX into a wrong mask)."""


def _diagonal(diagonal: int) -> int:
    return max(-TRIANGLE_DIAGONAL_BOUND, min(TRIANGLE_DIAGONAL_BOUND, int(diagonal)))


def tril(xp, x, *, diagonal: int):
    """X's last two dims (of any batch) with the elements above ``diagonal`` zeroed (numpy's tril)."""
    return xp.tril(x, _diagonal(diagonal))


def triu(xp, x, *, diagonal: int):
    """X's last two dims (of any batch) with the elements below ``diagonal`` zeroed (numpy's triu)."""
    return xp.triu(x, _diagonal(diagonal))


def _triangle(ctx):
    x = ctx.input("X")
    if len(x.shape) < 2:
        ctx.fail(f"X must have rank >= 2 (matrices in its last two dims), got {x.dtype}{list(x.shape)}")
    return {"Out": x}


SCHEMAS = (
    schema("sum", [Slot("X", duplicable=True)], ["Out"], _sum, doc="Out = X[0] + X[1] + ... (same shapes).",
           dtypes={"X": NUMERIC_DTYPES}, compute=sum_),
    schema("reduce_as", ["X", "Target"], ["Out"], _reduce_as,
           doc="Sum X over the dims that broadcasting added to Target's run-time shape: the adjoint of broadcast.",
           dtypes={"X": NUMERIC_DTYPES, "Target": DTYPES}, compute=reduce_as, inputs_as_given=True,
           finite_out_proves=("X",)),
    schema("broadcast_to", ["X", Slot("ShapeLike", optional=True)], ["Out"], _broadcast_to, {"shape": Attr("ints", [])},
           doc="X broadcast to `shape`, or to ShapeLike's run-time shape when given.",
           dtypes={"X": DTYPES, "ShapeLike": DTYPES}, compute=broadcast_to, inputs_as_given=True),
    schema("reshape", ["X"], ["Out"], _reshape, {"shape": Attr("ints")},
           doc="X with a new shape of the same size; one dim may be -1 (inferred) and 0 copies X's dim.",
           dtypes={"X": DTYPES},
           compute=lambda xp, x, shape: xp.reshape(x, tuple(x.shape[i] if d == 0 else d for i, d in enumerate(shape)))),
    schema("transpose", ["X"], ["Out"], _transpose, {"perm": Attr("ints")}, doc="X with its dims permuted.",
           dtypes={"X": DTYPES}, compute=lambda xp, x, perm: xp.permute_dims(x, tuple(perm))),
    schema("concat", [Slot("X", duplicable=True)], ["Out"], _concat, {"axis": Attr("int", 0)},
           doc="The inputs joined along `axis`.", dtypes={"X": DTYPES},
           compute=lambda xp, *xs, axis: xp.concat(xs, axis=axis)),
    schema("split", ["X"], [Slot("Out", duplicable=True)], _split, {"axis": Attr("int", 0), "sections": Attr("ints")},
           doc="X cut along `axis` into pieces of the sizes in `sections` (one may be -1: the rest).",
           dtypes={"X": DTYPES}, compute=split),
    schema("slice", ["X"], ["Out"], _slice,
           {"axes": Attr("ints"), "starts": Attr("ints"), "ends": Attr("ints"), "strides": Attr("ints", [])},
           doc="X[starts:ends:strides] along each of `axes`, with Python's clamping and negative indices and steps.",
           dtypes={"X": DTYPES}, compute=slice_),
    schema("pad", ["X"], ["Out"], _pad, {"paddings": Attr("ints"), "pad_value": Attr("float", 0.0)},
           doc="X with `paddings` (before, after for each dim) elements of `pad_value` added around it.",
           dtypes={"X": NUMERIC_DTYPES}, compute=pad),
    schema("cumsum", ["X"], ["Out"], _cumsum,
           {"axis": Attr("int", -1), "exclusive": Attr("bool", False), "reverse": Attr("bool", False)},
           doc="Running sums along `axis` (from the end when `reverse`; without the element itself when `exclusive`).",
           dtypes={"X": NUMERIC_DTYPES}, compute=cumsum),
    schema("squeeze", ["X"], ["Out"], _squeeze, {"axes": Attr("ints", [])},
           doc="X without the size-1 dims in `axes` (every size-1 dim when empty).", dtypes={"X": DTYPES},
           compute=squeeze),
    schema("unsqueeze", ["X"], ["Out"], _unsqueeze, {"axes": Attr("ints")},
           doc="X with size-1 dims inserted at `axes`, one after another.", dtypes={"X": DTYPES},
           compute=unsqueeze),
    schema("stack", [Slot("X", duplicable=True)], ["Out"], _stack, {"axis": Attr("int", 0)},
           doc="Inputs of one shape stacked along a new dim `axis`.", dtypes={"X": DTYPES}, compute=stack),
    schema("gather", ["X", "Index"], ["Out"], _gather, {"axis": Attr("int", 0)},
           doc="X's slices at the integers of Index along `axis` (numpy's take).",
           dtypes={"X": DTYPES, "Index": INT_DTYPES}, compute=gather),
    schema("flatten", ["X"], ["Out"], _flatten, {"axis": Attr("int", 1)},
           doc="X as a matrix: its dims before `axis` multiplied into the rows, the rest into the columns "
               "(ONNX Flatten, Paddle's flatten).", dtypes={"X": DTYPES}, compute=flatten),
    schema("tril", ["X"], ["Out"], _triangle, {"diagonal": Attr("int", 0)},
           doc="X with the elements above diagonal `diagonal` of its last two dims set to zero (numpy's tril; "
               "0 is the main diagonal, k > 0 above it).", dtypes={"X": DTYPES}, compute=tril),
    schema("triu", ["X"], ["Out"], _triangle, {"diagonal": Attr("int", 0)},
           doc="X with the elements below diagonal `diagonal` of its last two dims set to zero (numpy's triu).",
           dtypes={"X": DTYPES}, compute=triu),
)


__all__ = ["SCHEMAS", "TRIANGLE_DIAGONAL_BOUND", "broadcast_to", "cumsum", "cut", "flatten", "gather",
           "gather_grad", "pad", "positions", "reduce_as", "section_sizes", "slice_", "slice_grad", "slice_index", "slice_strides",
           "split", "squeeze", "stack", "sum_", "take", "tril", "triu", "unsqueeze"]
