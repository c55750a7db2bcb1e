"""Gradients of ops that move elements: mostly the inverse movement, often the very same op type."""
from __future__ import annotations

import numpy as np

from gradgen.program.shapes import normalize_axis

from .base import grad_maker, only_grad, op, summed_back


@grad_maker("sum", emits=("assign",))
def sum_grad(fwd, ctx):
    """One op per input: each addend's gradient is the output's (an assign shares the array)."""
    dout = ctx.output_grad("Out")[0]
    return [op("assign", {"X": dout}, {"Out": g}) for g in ctx.input_grad("X") if g is not None]


@grad_maker("assign", emits=("assign",))
def assign_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [op("assign", {"X": ctx.output_grad("Out")[0]}, {"Out": dx})])


@grad_maker("cast", emits=("cast",))
def cast_grad(fwd, ctx):
    dtype = ctx.var_type(ctx.input("X")[0]).dtype
    return only_grad(ctx, "X", lambda dx: [op("cast", {"X": ctx.output_grad("Out")[0]}, {"Out": dx}, out_dtype=dtype)])


@grad_maker("broadcast_to", emits=("reduce_as",))
def broadcast_to_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("reduce_as", {"X": ctx.output_grad("Out")[0], "Target": ctx.input("X")[0]}, {"Out": dx})])


@grad_maker("reduce_as", emits=("broadcast_to",))
def reduce_as_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("broadcast_to", {"X": ctx.output_grad("Out")[0], "ShapeLike": ctx.input("X")[0]}, {"Out": dx})])


@grad_maker("reshape", "squeeze", "unsqueeze", "reshape_as", emits=("reshape_as",))
def reshape_grad(fwd, ctx):
    """Any pure reshape: the gradient is the output gradient reshaped to the input's run-time shape."""
    return only_grad(ctx, "X", lambda dx: [
        op("reshape_as", {"X": ctx.output_grad("Out")[0], "Target": ctx.input("X")[0]}, {"Out": dx})])


@grad_maker("transpose", emits=("transpose",))
def transpose_grad(fwd, ctx):
    inverse = [int(i) for i in np.argsort(fwd.attr("perm"))]
    return only_grad(ctx, "X", lambda dx: [
        op("transpose", {"X": ctx.output_grad("Out")[0]}, {"Out": dx}, perm=inverse)])


@grad_maker("concat", emits=("split", "split_like"))
def concat_grad(fwd, ctx):
    """concat -> split at the inputs' sizes along the axis (pieces nobody wants go to temporaries)."""
    grads = ctx.input_grad("X")
    if all(g is None for g in grads):
        return []
    xs = ctx.input("X")
    rank = len(ctx.var_type(xs[0]).shape)
    axis = normalize_axis(fwd.attr("axis"), rank)
    sizes = [ctx.var_type(x).shape[axis] for x in xs]
    if any(s < 0 for s in sizes):
        # Sizes known only at run time: cut each piece with a slice_like op instead.
        return [op("split_like", {"X": ctx.output_grad("Out")[0], "Like": xs}, {"Out": [g or ctx.tmp("unused")
                                                                                    for g in grads]}, axis=axis)]
    outs = [g if g is not None else ctx.tmp("unused") for g in grads]
    return [op("split", {"X": ctx.output_grad("Out")[0]}, {"Out": outs}, axis=axis, sections=sizes)]


@grad_maker("split", emits=("concat",))
def split_grad(fwd, ctx):
    """split -> concat of the pieces' gradients (the pass zero-fills pieces nothing used)."""
    return only_grad(ctx, "X", lambda dx: [op("concat", {"X": ctx.output_grad("Out")}, {"Out": dx},
                                                axis=fwd.attr("axis"))])


@grad_maker("stack", emits=("split", "squeeze"))
def stack_grad(fwd, ctx):
    """stack -> split into size-1 pieces along the axis, then squeeze each wanted piece."""
    grads = ctx.input_grad("X")
    if all(g is None for g in grads):
        return []
    rank = len(ctx.var_type(ctx.output("Out")[0]).shape)
    axis = normalize_axis(fwd.attr("axis"), rank)
    pieces = [ctx.tmp("piece") for _ in grads]
    descs = [op("split", {"X": ctx.output_grad("Out")[0]}, {"Out": pieces}, axis=axis, sections=[1] * len(grads))]
    descs += [op("squeeze", {"X": p}, {"Out": g}, axes=[axis]) for p, g in zip(pieces, grads) if g is not None]
    return descs


@grad_maker("slice", emits=("slice_grad",))
def slice_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("slice_grad", {"X": ctx.input("X")[0], "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dx}, **fwd.attrs)])


@grad_maker("gather", emits=("gather_grad",))
def gather_grad(fwd, ctx):
    return only_grad(ctx, "X", lambda dx: [
        op("gather_grad", {"X": ctx.input("X")[0], "Index": ctx.input("Index")[0],
                           "Out@GRAD": ctx.output_grad("Out")[0]}, {"X@GRAD": dx}, axis=fwd.attr("axis"))])


@grad_maker("where", emits=("fill_zeros_like", "where", "reduce_as"))
def where_grad(fwd, ctx):
    """Each branch gets the output gradient where it was chosen and zero elsewhere, summed back to its shape."""
    cond, dout = ctx.input("Condition")[0], ctx.output_grad("Out")[0]
    full = ctx.var_type(ctx.output("Out")[0]).shape
    zeros = ctx.tmp("zeros")
    descs = []
    for slot, picks_dout in (("X", True), ("Y", False)):
        (g,) = ctx.input_grad(slot)
        if g is None:
            continue
        if not descs:
            descs.append(op("fill_zeros_like", {"X": dout}, {"Out": zeros}))
        xy = {"X": dout, "Y": zeros} if picks_dout else {"X": zeros, "Y": dout}
        descs += summed_back(ctx, full, ctx.input(slot)[0], g,
                             lambda t, xy=xy: [op("where", {"Condition": cond, **xy}, {"Out": t})])
    return descs
