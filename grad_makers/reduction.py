"""Gradients of reductions: broadcast the output gradient back over the reduced dims."""
from __future__ import annotations

from gradgen.program.shapes import normalize_axes

from .base import grad_maker, only_grad, op


def _reduced_axes(fwd, rank: int) -> list[int]:
    dim = fwd.attr("dim")
    if fwd.attr("reduce_all") or not dim:
        return list(range(rank))
    return sorted(normalize_axes(dim, rank))


def _kept(fwd, ctx, name: str) -> tuple[list, str]:
    """``name`` (shaped like the reduced output) with the reduced dims put back as size 1."""
    rank = len(ctx.var_type(ctx.input("X")[0]).shape)
    axes = _reduced_axes(fwd, rank)
    if fwd.attr("keep_dim") or len(axes) == rank:  # a scalar broadcasts as it is
        return [], name
    kept = ctx.tmp("kept")
    return [op("unsqueeze", {"X": name}, {"Out": kept}, axes=axes)], kept


@grad_maker("reduce_sum", emits=("unsqueeze", "broadcast_to"))
def reduce_sum_grad(fwd, ctx):
    (dx,) = ctx.input_grad("X")
    if dx is None:
        return []
    descs, dout = _kept(fwd, ctx, ctx.output_grad("Out")[0])
    return descs + [op("broadcast_to", {"X": dout, "ShapeLike": ctx.input("X")[0]}, {"Out": dx})]


@grad_maker("reduce_mean", emits=("reduce_mean_grad",))
def reduce_mean_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("reduce_mean_grad", {"X": ctx.input("X")[0], "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dx},
           **fwd.attrs)])


@grad_maker("mean", emits=("reduce_mean_grad",))
def mean_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("reduce_mean_grad", {"X": ctx.input("X")[0], "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dx},
           reduce_all=True)])


@grad_maker("reduce_max", "reduce_min", emits=("unsqueeze", "equal", "cast", "elementwise_mul"))
def reduce_extreme_grad(fwd, ctx):
    """The gradient flows to every element equal to the extreme (ties all receive it, as in Paddle)."""
    (dx,) = ctx.input_grad("X")
    if dx is None:
        return []
    x = ctx.input("X")[0]
    out_descs, out = _kept(fwd, ctx, ctx.output("Out")[0])
    dout_descs, dout = _kept(fwd, ctx, ctx.output_grad("Out")[0])
    mask, mask_f = ctx.tmp("is_extreme"), ctx.tmp("is_extreme_f")
    return out_descs + dout_descs + [
        op("equal", {"X": x, "Y": out}, {"Out": mask}),
        op("cast", {"X": mask}, {"Out": mask_f}, out_dtype=ctx.var_type(x).dtype),
        op("elementwise_mul", {"X": mask_f, "Y": dout}, {"Out": dx}),
    ]
