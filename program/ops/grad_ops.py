"""Fused ops that grad makers emit where one pass beats a chain of ordinary ops (the activations' own are with
them, in ``activation``).

Each is an ordinary registered op with a schema, a kernel and a grad maker
of its own (``grad_makers/grad_ops.py``), so gradients of gradients work.
"""
from __future__ import annotations

from ..dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES
from ..schema import Attr, Slot, TensorType, schema
from ..shapes import normalize_axis, shapes_agree
from .manipulation import cut, gather_grad, slice_grad


def _like_x(ctx):
    """X@GRAD has X's type; Out@GRAD must share X's dtype."""
    x = ctx.input("X")
    return {"X@GRAD": TensorType(x.shape, x.dtype)}


def _softmax_grad(ctx):
    out, dout = ctx.input("Out"), ctx.input("Out@GRAD")
    normalize_axis(ctx.attr("axis"), len(out.shape))
    if not shapes_agree(out.shape, dout.shape):
        ctx.fail(f"Out@GRAD must be shaped like Out {list(out.shape)}, got {list(dout.shape)}")
    return {"X@GRAD": out}


def _like_target(ctx):
    return {"Out": TensorType(ctx.input("Target").shape, ctx.input("X").dtype)}


def _split_like(ctx):
    x = ctx.input("X")
    return {"Out": [TensorType(t.shape, x.dtype) for t in ctx.inputs("Like")]}


_LIKE_X = {"X": FLOAT_DTYPES, "Out@GRAD": "X"}
"""A fused gradient takes float X and an Out@GRAD of X's dtype."""

SLICE_ATTRS = {"axes": Attr("ints"), "starts": Attr("ints"), "ends": Attr("ints"), "strides": Attr("ints", [])}

def softmax_grad(xp, out, dout, *, axis):
    """X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out, axis)): softmax's gradient from its output."""
    axis = normalize_axis(axis, out.ndim)
    return (dout - xp.sum(dout * out, axis=axis, keepdims=True)) * out


def softmax_grad_aten(ops, out, dout, *, axis):
    """``softmax_grad`` as ATen's ``_softmax_backward_data``: the same Out * (Out@GRAD - sum(Out@GRAD * Out)), a
    row at a time (None for a 0-d Out, which the compute refuses by name). The torch engine's kernel on the
    anchors' transformer block's attention weights [16, 4, 128, 128] float32, two threads, inside its step (the
    finiteness sum of Out@GRAD included; Out, softmax's output, is known finite): 0.83-0.86 ms against the
    compute's four passes' 1.34-1.57 (2026-12-01, two processes each)."""
    if out.ndim == 0:
        return None
    return ops._softmax_backward_data(dout, out, normalize_axis(axis, out.ndim), out.dtype)


def reshape_as(xp, x, target):
    """X reshaped to Target's run-time shape: reshape's adjoint, where that shape is known only at run time."""
    return xp.reshape(x, tuple(target.shape))


def split_like(xp, x, *likes, axis: int) -> list:
    """X cut along ``axis`` into pieces sized like each Like var at run time, the last taking the rest (numpy's
    split): concat's adjoint."""
    return cut(x, axis, [like.shape[axis] for like in likes])


SCHEMAS = (
    schema("softmax_grad", ["Out", "Out@GRAD"], ["X@GRAD"], _softmax_grad, {"axis": Attr("int", -1)},
           doc="X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out, axis)): softmax's gradient from its output Out.",
           dtypes={"Out": FLOAT_DTYPES, "Out@GRAD": "Out"}, compute=softmax_grad, aten=softmax_grad_aten),
    schema("slice_grad", ["X", "Out@GRAD"], ["X@GRAD"], _like_x, SLICE_ATTRS,
           doc="Zeros shaped like X with Out@GRAD written into the slice: the adjoint of slice.", dtypes=_LIKE_X,
           compute=slice_grad),
    schema("gather_grad", ["X", "Index", "Out@GRAD"], ["X@GRAD"], _like_x, {"axis": Attr("int", 0)},
           doc="Zeros shaped like X with Out@GRAD added at Index along axis (repeats accumulate).",
           dtypes={**_LIKE_X, "Index": INT_DTYPES}, compute=gather_grad),
    schema("reshape_as", ["X", "Target"], ["Out"], _like_target,
           doc="X reshaped to Target's run-time shape (same element count).", dtypes={"X": DTYPES, "Target": DTYPES},
           compute=reshape_as, inputs_as_given=True),
    schema("split_like", ["X", Slot("Like", duplicable=True)], [Slot("Out", duplicable=True)], _split_like,
           {"axis": Attr("int", 0)},
           doc="X cut along axis into pieces sized like each Like var at run time: concat's adjoint.",
           dtypes={"X": DTYPES, "Like": DTYPES}, compute=split_like, inputs_as_given=True),
)


__all__ = ["SLICE_ATTRS", "SCHEMAS", "reshape_as", "softmax_grad", "softmax_grad_aten", "split_like"]
