"""Lowerings of the ops that move, regroup or pick elements (``program/ops/manipulation.py`` and friends)."""
from __future__ import annotations

import numpy as np

from .context import Lowering
from .graph import fill_value, value_info
from .lower_math import reduce_node, shape_of

__all__ = ["LOWERINGS", "OWN_EXPORTS", "static_dim"]


def static_dim(ctx: Lowering, slot: str, axis: int) -> int | None:
    d = ctx.var(slot).shape[axis]
    return None if d < 0 else d


def sum_(ctx):
    xs = ctx.xs("X")
    out = xs[0]
    for x in xs[1:]:  # left to right, as the kernel adds
        out = ctx.g.node("Add", [out, x])
    ctx.finish(out)


def reduce_as(ctx):
    # the adjoint of broadcasting: sum the leading dims away, then the dims the target has as 1; where the
    # target's dim is unknown, an If sums that axis when it turns out to be 1 at run time
    g, x, lead = ctx.g, ctx.x(), ctx.rank("X") - ctx.rank("Target")
    if lead:
        x = reduce_node(ctx, "ReduceSum", x, list(range(lead)), False)
    xs, ts = ctx.var("X").shape[lead:], ctx.var("Target").shape
    axes = [a for a, (dx, dt) in enumerate(zip(xs, ts)) if dt == 1 and dx != 1]
    if axes:
        x = reduce_node(ctx, "ReduceSum", x, axes, True)
    for a in (a for a, (dx, dt) in enumerate(zip(xs, ts)) if dt < 0 and dx != 1):
        target_dim = g.node("Shape", [ctx.x("Target")], start=a, end=a + 1)
        is_one = g.node("Reshape", [g.node("Equal", [target_dim, g.ints([1])]), g.ints([])])
        x = _if_else(ctx, is_one, lambda b, v, a=a: b.node("ReduceSum", [v, b.ints([a])], keepdims=1), x)
    ctx.finish(x)


def _if_else(ctx: Lowering, cond: str, then, x: str) -> str:
    """``then(builder, x)`` where ``cond`` holds at run time, else ``x`` itself: an ONNX If of two subgraphs."""
    dtype, rank = ctx.dtype(), ctx.rank()
    branches = {}
    for key in ("then", "else"):
        b, _ = ctx.subgraph()
        out = then(b, x) if key == "then" else b.node("Identity", [x])
        branches[key] = b.graph(f"{key}_branch", [], [value_info(out, dtype, [-1] * rank)])
    return ctx.g.node("If", [cond], then_branch=branches["then"], else_branch=branches["else"])


def broadcast_to(ctx):
    g = ctx.g
    shape = shape_of(ctx, ctx.x("ShapeLike")) if ctx.has("ShapeLike") else g.ints(ctx.attr("shape"))
    ctx.emit("Expand", [ctx.x(), shape])


def reshape(ctx):
    ctx.emit("Reshape", [ctx.x(), ctx.g.ints(ctx.attr("shape"))])


def flatten(ctx):
    ctx.emit("Flatten", [ctx.x()], axis=ctx.attr("axis"))


def _triangle(upper: int):
    def lower(ctx):
        ctx.emit("Trilu", [ctx.x(), ctx.g.const(np.int64(ctx.attr("diagonal")))], upper=upper)
    return lower


def reshape_as(ctx):
    # allowzero: a Target with a zero-size dim gives that 0, where ONNX's default would copy X's dim there
    ctx.emit("Reshape", [ctx.x(), shape_of(ctx, ctx.x("Target"))], allowzero=1)


def transpose(ctx):
    ctx.emit("Transpose", [ctx.x()], perm=list(ctx.attr("perm")))


def concat(ctx):
    ctx.emit("Concat", ctx.xs("X"), axis=ctx.attr("axis") % ctx.rank())


def split_sizes(ctx: Lowering) -> list[int]:
    axis = ctx.attr("axis") % ctx.rank()
    sizes = list(ctx.attr("sections"))
    if -1 in sizes:
        sizes[sizes.index(-1)] = ctx.var().shape[axis] - (sum(sizes) + 1)
    return sizes


def _split_into(ctx: Lowering, sizes: str, axis: int) -> None:
    if len(ctx.op.output("Out")) == 1:
        return ctx.finish(ctx.x())
    outs = [ctx.name("Out", k) for k in range(len(ctx.op.output("Out")))]
    ctx.g.node_multi("Split", [ctx.x(), sizes], outs, axis=axis)
    for k, name in enumerate(outs):
        ctx.set(name, "Out", k)


def split(ctx):
    _split_into(ctx, ctx.g.ints(split_sizes(ctx)), ctx.attr("axis") % ctx.rank())


def split_like(ctx):
    g, axis = ctx.g, ctx.attr("axis") % ctx.rank()
    sizes = [g.node("Gather", [shape_of(ctx, like), g.ints([axis])]) for like in ctx.xs("Like")]
    _split_into(ctx, g.node("Concat", sizes, axis=0), axis)


def slice_(ctx):
    rank, g = ctx.rank(), ctx.g
    if not ctx.attr("axes"):  # nothing sliced (a 0-d X too, which ONNX Runtime's Slice refuses)
        return ctx.finish(ctx.x())
    axes = [a % rank for a in ctx.attr("axes")]
    steps = list(ctx.attr("strides") or [1] * len(axes))
    ctx.emit("Slice", [ctx.x(), g.ints(ctx.attr("starts")), g.ints(ctx.attr("ends")), g.ints(axes), g.ints(steps)])


def pad(ctx):
    # gradgen pairs (before, after) per dim; ONNX lists every dim's before, then every dim's after
    pads, dt = ctx.attr("paddings"), ctx.dtype()
    if not pads:
        return ctx.finish(ctx.x())
    onnx_pads = pads[0::2] + pads[1::2]
    ctx.emit("Pad", [ctx.x(), ctx.g.ints(onnx_pads), ctx.scalar(ctx.attr("pad_value"), dt)], mode="constant")


def cumsum(ctx):
    axis = ctx.attr("axis") % ctx.rank()
    ctx.emit("CumSum", [ctx.x(), ctx.g.const(np.int64(axis))], exclusive=int(ctx.attr("exclusive")),
             reverse=int(ctx.attr("reverse")))


def slice_pads(shape, axes, starts, ends) -> list[int]:
    """ONNX Pad amounts that put a slice of an array of static ``shape`` back in place (Python's clamping)."""
    rank = len(shape)
    begin, end = [0] * rank, [0] * rank
    for a, s, e in zip(axes, starts, ends):
        a = a % rank
        lo, hi, _ = slice(s, e).indices(shape[a])
        hi = max(hi, lo)
        begin[a], end[a] = lo, shape[a] - hi
    return begin + end


def slice_grad(ctx):
    if any(st != 1 for st in ctx.attr("strides")):
        return _strided_slice_grad(ctx)
    pads = slice_pads(ctx.var("X").shape, ctx.attr("axes"), ctx.attr("starts"), ctx.attr("ends"))
    ctx.emit("Pad", [ctx.x("Out@GRAD"), ctx.g.ints(pads)], slot="X@GRAD")


def _strided_slice_grad(ctx):
    # one sliced axis at a time: move it first and ScatterND the rows into zeros at the positions the slice
    # took (known now: the limit asks for known sizes on the sliced axes), Python's clamping included
    g, shape, rank = ctx.g, ctx.var("X").shape, ctx.rank("X")
    grad, dt = ctx.x("Out@GRAD"), ctx.dtype("Out@GRAD")
    for a, start, end, step in zip(ctx.attr("axes"), ctx.attr("starts"), ctx.attr("ends"), ctx.attr("strides")):
        a = a % rank
        taken = np.arange(shape[a])[slice(start, end, step)]
        perm = [a] + [d for d in range(rank) if d != a]
        moved = g.node("Transpose", [grad], perm=perm)
        zeros_shape = g.node("Concat", [g.ints([shape[a]]), g.node("Shape", [moved], start=1)], axis=0)
        zeros = g.node("ConstantOfShape", [zeros_shape], value=fill_value(0, dt))
        placed = g.node("ScatterND", [zeros, g.const(taken.astype(np.int64).reshape(-1, 1)), moved])
        grad = g.node("Transpose", [placed], perm=[int(i) for i in np.argsort(perm)])
    ctx.finish(grad, "X@GRAD")


def squeeze(ctx):
    axes = ctx.attr("axes")
    if not axes:
        axes = [a for a, d in enumerate(ctx.var().shape) if d == 1]
    ctx.emit("Squeeze", [ctx.x(), ctx.g.ints(sorted({a % ctx.rank() for a in axes}))])


def unsqueeze(ctx):
    x, rank = ctx.x(), ctx.rank()
    for a in ctx.attr("axes"):  # one at a time, each normalized against the rank so far, as the kernel does
        x = ctx.g.node("Unsqueeze", [x, ctx.g.ints([a % (rank + 1)])])
        rank += 1
    ctx.finish(x)


def stack(ctx):
    axis = ctx.attr("axis") % (ctx.rank() + 1)
    parts = [ctx.g.node("Unsqueeze", [x, ctx.g.ints([axis])]) for x in ctx.xs("X")]
    ctx.emit("Concat", parts, axis=axis)


def gather(ctx):
    ctx.emit("Gather", [ctx.x(), ctx.x("Index")], axis=ctx.attr("axis") % ctx.rank())


def gather_grad(ctx):
    # np.add.at as ONNX's ScatterElements with reduction "add" onto zeros shaped like X: Out@GRAD viewed as
    # [X's dims before the axis, the flattened index, X's dims after it], each index broadcast along it (negative
    # ones count from the end, as gather's do). Only the gathered rows receive a gradient (a one-hot matmul, the
    # export before, put 0 * inf = NaN in all the others)
    g, x, rank = ctx.g, ctx.x("X"), ctx.rank("X")
    axis, dt, dout = ctx.attr("axis") % rank, ctx.dtype("Out@GRAD"), ctx.x("Out@GRAD")
    index = ctx.x("Index")
    if ctx.rank("Index") != 1:  # Out@GRAD's index dims merged into one (its own dims around them copied)
        index = g.node("Reshape", [index, g.ints([-1])])
        douts, after = shape_of(ctx, dout), axis + ctx.rank("Index")
        parts = [g.node("Slice", [douts, g.ints([0]), g.ints([axis])]), g.ints([-1]),
                 g.node("Slice", [douts, g.ints([after]), g.ints([after + rank - axis - 1])])]
        dout = g.node("Reshape", [dout, g.node("Concat", parts, axis=0)])
    along = g.node("Reshape", [index, g.ints([1] * axis + [-1] + [1] * (rank - axis - 1))])
    zeros = g.node("ConstantOfShape", [shape_of(ctx, x)], value=fill_value(0.0, dt))
    ctx.emit("ScatterElements", [zeros, g.node("Expand", [along, shape_of(ctx, dout)]), dout], slot="X@GRAD",
             axis=axis, reduction="add")


def lookup_table(ctx):
    ctx.emit("Gather", [ctx.x("W"), ctx.x("Ids")], axis=0)


LOWERINGS = {
    "sum": sum_, "reduce_as": reduce_as, "broadcast_to": broadcast_to, "reshape": reshape, "reshape_as": reshape_as,
    "transpose": transpose, "concat": concat, "split": split, "split_like": split_like, "slice": slice_,
    "slice_grad": slice_grad, "squeeze": squeeze, "unsqueeze": unsqueeze, "stack": stack, "gather": gather,
    "gather_grad": gather_grad, "lookup_table": lookup_table, "pad": pad, "cumsum": cumsum, "flatten": flatten,
    "tril": _triangle(0), "triu": _triangle(1),
}
"""gradgen op type -> lowering."""


def _split_limit(op) -> str | None:
    shape = op.block.var(op.input("X")[0]).shape
    if -1 in op.attr("sections") and shape[op.attr("axis") % len(shape)] < 0:
        return "a -1 section along an axis of unknown size"
    return None


def _slice_grad_limit(op) -> str | None:
    shape = op.block.var(op.input("X")[0]).shape
    rank = len(shape)
    if any(shape[a % rank] < 0 for a in op.attr("axes")):
        return f"X has unknown sizes on the sliced axes (shape {list(shape)})"
    return None


def _broadcast_limit(op) -> str | None:
    if not op.input("ShapeLike") and any(d < 0 for d in op.attr("shape")):
        return f"the target shape {op.attr('shape')} has unknown dims"
    return None


LIMITS = {"split": _split_limit, "slice_grad": _slice_grad_limit,
          "broadcast_to": _broadcast_limit}
"""op type -> check returning why this op cannot be exported, or None."""

OWN_EXPORTS = {"transpose": "one Transpose node with its perm (ONNX's xp has no permute_dims to trace)",
               "reshape": "one Reshape node, its target shape a constant input (ONNX's 0 and -1 mean what gradgen's do)",
               "concat": "one Concat node, its axis made non-negative (older opsets take no negative axis)",
               "cumsum": "one CumSum node with its exclusive and reverse attrs (ONNX's xp has no cumsum or slicing)",
               **{t: "one Trilu node, its diagonal a constant input (ONNX's xp has no tril or triu)"
                  for t in ("tril", "triu")},
               "sum": "Add nodes, left to right (its compute reads the addends' shapes to refuse ones that differ, "
                      "which an ONNX value does not know)",
               "reduce_as": "ReduceSum over the axes the declared shapes name, and an If where Target's dim is known "
                            "only at run time (its compute reads the run-time shapes)",
               "broadcast_to": "one Expand node to ShapeLike's run-time Shape or the attr (its compute reads "
                               "ShapeLike's shape)",
               "reshape_as": "one Reshape node to Target's run-time Shape (its compute reads Target's shape)",
               "squeeze": "one Squeeze node of the axes named or declared of size 1 (its compute reads X's shape)",
               "unsqueeze": "Unsqueeze nodes, one axis after another (its compute reads X's shape)",
               "flatten": "one Flatten node (its compute reads X's shape)",
               "stack": "Unsqueeze nodes joined by Concat (its compute reads the inputs' shapes)",
               **{t: "one Split node of several outputs (a traced export has one output; its compute reads shapes)"
                  for t in ("split", "split_like")},
               "pad": "one Pad node, gradgen's (before, after) pairs as ONNX's befores then afters (ONNX's xp has no "
                      "pad)",
               "slice": "one Slice node of the attrs (its compute slices X by its shape; ONNX's xp has no indexing)",
               "slice_grad": "one Pad node, or a ScatterND per strided axis, placed by X's static shape (its compute "
                             "reads X's shape)",
               "gather": "one Gather node (ONNX's xp has no indexing; ONNX Runtime refuses an index out of range)",
               "gather_grad": "ScatterElements adding onto zeros of X's run-time Shape (ONNX's xp has no "
                              "scatter_rows)",
               "lookup_table": "one Gather node along axis 0 (ONNX's xp has no indexing)"}
"""Ops with a formula (``OpSchema.compute``) exported here rather than from it (``lower_derived``), and why."""
