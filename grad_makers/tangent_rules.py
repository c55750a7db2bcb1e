"""What every tangent rule shares: the tag, the view of the op it pushes tangents through, and small helpers.

A tangent rule is a pure function ``rule(g, op) -> {output slot: tangent}``:
forward mode's counterpart of a grad maker, written in the same family module
right after the op's maker (``activation.py``: ``exp_tangent = slope(exp_grad)``).
``op`` (a ``TangentContext``) describes the op and the tangents of its inputs
(``op.tangent(slot)``, None where an input has none: a symbolic zero); ``g``
(the makers' ``Builder``) records the ops that compute the output tangents. A
rule returns None for an output without a tangent, and never sees numbers.
``tangents.py`` gathers the tagged rules into ``TANGENT_RULES``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Protocol, Sequence

from .base import OpView, tag_rule
from .builder import Builder, total


class TangentContext(OpView, Protocol):
    """What a tangent rule may ask about its op (see gradgen.framework.passes.forward)."""

    def tangent(self, slot: str) -> str | None: ...
    def tangents(self, slot: str) -> list[str | None]: ...
    def tangent_block(self, block: int, results: Sequence[str], seeds: Sequence[tuple[str, str]],
                      carried: Sequence[str] = (), keep: Sequence[str] = ()) -> tuple[int, list[str], list[str]]: ...
    def transposed_block(self, block: int, results: Sequence[str], directions: Sequence[str | None],
                         wrt: Sequence[str]) -> tuple[int, list[str]]: ...
    def reads(self, blocks: Sequence[int]) -> list[str]: ...


Tangents = dict[str, Any]
"""Output slot -> its tangent (a list for a slot of several vars); None: no tangent."""

TangentRule = Callable[[Builder, TangentContext], Tangents]


def tangent_rule(*op_types: str, emits: Sequence[str]) -> Callable[[TangentRule], TangentRule]:
    """Tag a function as the tangent rule of ``op_types``; ``tangents`` collects tagged rules.

    ``emits`` lists the op types the rule may record; the builder refuses any other.
    """
    return tag_rule("tangent_of", op_types, emits)


def by_name(rule: Callable, fixed: int, op: TangentContext) -> dict[str, Any]:
    """The keyword arguments of ``rule`` after its first ``fixed`` parameters: ``op`` itself or its attrs by name."""
    names = tuple(inspect.signature(rule).parameters)[fixed:]
    return {n: op if n == "op" else op.attr(n) for n in names}


def at_shape(g: Builder, op: TangentContext, value, name: str, out: str) -> Any:
    """``value`` (a tangent shaped like input ``name``) broadcast to output ``out``'s shape if it was smaller.

    Uses gradgen's broadcasting convention, as the reverse rules do: two -1
    dims that meet in a broadcast have the same run-time size.
    """
    if value is None or op.shape(name) == op.shape(out):
        return value
    return g.broadcast_to(value, out)


def linear_in(*op_types: str, slot: str = "X", out: str = "Out", emits: Sequence[str] | None = None) -> TangentRule:
    """An op linear in input ``slot`` (its other inputs are indices, masks or shapes): the tangent is the op
    itself applied to that input's tangent, with the other inputs and the attrs as they are. An output slot
    of several vars (split's pieces) gets one tangent each."""

    def rule(g: Builder, op: TangentContext) -> Tangents:
        t = op.tangent(slot)
        if t is None:
            return {}
        inputs, count = {**op.input_slots(), slot: t}, len(op.outputs(out))
        if count == 1:
            return {out: g.op(op.type, inputs, op.attrs, outputs=out)}
        return g.op(op.type, inputs, op.attrs, outputs={out: count})

    return tangent_rule(*op_types, emits=tuple(emits) if emits is not None else op_types)(rule)


def slope(maker) -> TangentRule:
    """``dout = f'(x) * dx`` for a maker made by ``families.from_input``/``from_output``: the slope it keeps,
    read from the input or from the output as the maker reads it."""
    formula, of_output = maker.slope, maker.slope_of == "Out"

    def rule(g: Builder, op: TangentContext) -> Tangents:
        t = op.tangent("X")
        if t is None:
            return {}
        v = op.output("Out") if of_output else op.input("X")
        return {"Out": g.mul(t, formula(g, v, **by_name(formula, 2, op)))}

    return tangent_rule(*maker.grad_of, emits=maker.emits)(rule)


def diagonal(maker) -> TangentRule:
    """A unary op's Jacobian is diagonal, so ``J t`` is ``J^T t``: the ``families.unary`` maker's
    ``rule(g, x, out, dout)`` applied to the tangent in place of ``dout``."""
    formula = maker.rule

    def rule(g: Builder, op: TangentContext) -> Tangents:
        t = op.tangent("X")
        if t is None:
            return {}
        return {"Out": formula(g, op.input("X"), op.output("Out"), t, **by_name(formula, 4, op))}

    return tangent_rule(*maker.grad_of, emits=maker.emits)(rule)


def zeros_for_missing(g: Builder, names: Sequence[str], tangents: Sequence) -> list:
    """``tangents`` with each None replaced by zeros shaped like the var at the same place of ``names``."""
    return [g.fill_zeros_like(n) if t is None else t for n, t in zip(names, tangents)]


__all__ = ["TangentContext", "Tangents", "TangentRule", "tangent_rule", "by_name", "total", "at_shape", "linear_in",
           "slope", "diagonal", "zeros_for_missing"]
