"""Gradients and tangents of running and whole products and sums: cumsum, and reduce_prod exactly at zeros, at
every order.

reduce_prod's gradient is, for each element, the product of all the others.
Dividing the product by the element fails at zeros (one zero: only that
element has a gradient; two: none has, though the Hessian does), so the
maker emits ``prod_others``, whose kernel multiplies exclusive running
products from both ends: O(n), no division.

``prod_others``'s own gradient (reduce_prod's second order) is the Hessian of
the product applied to the incoming gradient w: (H w)_j = sum over k != j of
w_k times the product of the elements other than j and k. H is symmetric, so
that is the derivative of prod_others(x + t w) at t = 0. The maker builds it
as the same two running products on dual numbers (value, t-part), each a
log-depth scan of ``slice``, ``pad`` and ``elementwise_mul``/``add``: a
polynomial in x and w made of ops with exact gradients, so the third and
higher orders are exact too. The scan needs the reduced size at compile time.

Tangents: running sums are linear; a product moves by sum(prod_others(x) * dx),
and prod_others by its derivative in the tangent's direction, which its grad
maker already builds (the product's Hessian is symmetric), exact at zeros.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.shapes import numel

from .base import grad_maker
from .builder import RuleError
from .families import linear, reduced_axes, reduction
from .reduction import weighted_sum
from .tangent_rules import linear_in, tangent_rule

BIG = 2 ** 62
"""A slice end past any dim (slicing clamps it)."""

cumsum_grad = linear("cumsum", emits=("cumsum",), transpose=lambda g, dout, axis, exclusive, reverse: g.op(
    "cumsum", {"X": dout}, {"axis": axis, "exclusive": exclusive, "reverse": not reverse}))
"""Running sums are linear; their adjoint runs the other way (exclusive stays exclusive)."""
cumsum_tangent = linear_in("cumsum")

reduce_prod_grad = reduction(
    "reduce_prod", emits=("unsqueeze", "prod_others", "elementwise_mul"),
    rule=lambda g, x, out, dout, dim, reduce_all: g.mul(
        dout, g.op("prod_others", {"X": x}, {"dim": dim, "reduce_all": reduce_all})))


@tangent_rule("reduce_prod", emits=("prod_others", "elementwise_mul", "reduce_sum"))
def reduce_prod_tangent(g, op):
    x, t = op.input("X"), op.tangent("X")
    if t is None:
        return {}
    others = g.op("prod_others", {"X": x}, {"dim": op.attr("dim"), "reduce_all": op.attr("reduce_all")})
    return {"Out": weighted_sum(g, op, t, others)}


def _shifted(g, v, rank: int, axis: int, d: int, reverse: bool, fill: float):
    """``v`` moved ``d`` places along ``axis`` in the scan's direction, ``fill`` coming in."""
    pads = [0] * (2 * rank)
    pads[2 * axis + (1 if reverse else 0)] = d
    start, end = (d, BIG) if reverse else (0, -d)
    part = g.op("slice", {"X": v}, {"axes": [axis], "starts": [start], "ends": [end]})
    return g.op("pad", {"X": part}, {"paddings": pads, "pad_value": fill})


def exclusive_cumprod_dual(g, x, dx, rank: int, axis: int, size: int, reverse: bool):
    """The product of x[i] over i < k (i > k when ``reverse``) for each k along ``axis``, and its derivative in
    direction ``dx``: Hillis-Steele doubling on dual numbers, (a, da) * (b, db) = (a b, da b + a db)."""
    acc, dacc, d = _shifted(g, x, rank, axis, 1, reverse, 1.0), _shifted(g, dx, rank, axis, 1, reverse, 0.0), 1
    while d < size - 1:
        other, dother = _shifted(g, acc, rank, axis, d, reverse, 1.0), _shifted(g, dacc, rank, axis, d, reverse, 0.0)
        acc, dacc, d = g.mul(acc, other), g.add(g.mul(dacc, other), g.mul(acc, dother)), 2 * d
    return acc, dacc


def others_product_derivative(g, op, x, w):
    """The derivative of prod_others(x + t w) at t = 0, for the reduced dims of ``op`` (a prod_others op)."""
    shape, axes = op.shape(x), reduced_axes(op)
    size = numel([shape[a] for a in axes])
    if size < 0:
        raise RuleError(f"prod_others' gradient (reduce_prod's second order) needs the sizes of the reduced dims "
                        f"{axes} at compile time, got {list(shape)}")
    if size == 0:
        return g.fill_zeros_like(x)
    kept = [a for a in range(len(shape)) if a not in axes]
    flat = len(axes) > 1
    if flat:  # reduced dims last, flattened into one
        moved = g.transpose(x, kept + axes)
        x, w = (g.op("reshape", {"X": v}, {"shape": [0] * len(kept) + [size]})
                for v in (moved, g.transpose(w, kept + axes)))
        axis, rank = len(kept), len(kept) + 1
    else:
        axis, rank = axes[0], len(shape)
    left, dleft = exclusive_cumprod_dual(g, x, w, rank, axis, size, False)
    right, dright = exclusive_cumprod_dual(g, x, w, rank, axis, size, True)
    result = g.add(g.mul(dleft, right), g.mul(left, dright))
    if flat:
        result = g.transpose(g.reshape_as(result, moved), [int(i) for i in np.argsort(kept + axes)])
    return result


@grad_maker("prod_others", emits=("slice", "pad", "elementwise_mul", "elementwise_add", "transpose", "reshape",
                                  "reshape_as", "fill_zeros_like"))
def prod_others_grad(g, op):
    """Symmetric in the sense above: the incoming gradient is the direction of the derivative."""
    return {"X": others_product_derivative(g, op, op.input("X"), op.grad("Out"))}


@tangent_rule("prod_others", emits=prod_others_grad.emits)
def prod_others_tangent(g, op):
    t = op.tangent("X")
    return {"Out": others_product_derivative(g, op, op.input("X"), t)} if t is not None else {}


__all__ = ["cumsum_grad", "cumsum_tangent", "reduce_prod_grad", "reduce_prod_tangent", "prod_others_grad",
           "prod_others_tangent", "exclusive_cumprod_dual", "others_product_derivative", "BIG"]
