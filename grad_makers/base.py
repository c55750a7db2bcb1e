"""What every grad maker shares: the op descriptions it returns, the tag, and its context.

A grad maker is a pure function ``maker(op, ctx) -> list[OpDesc]``. It reads
the forward op (slots, attrs, compile-time types) through ``ctx`` and
describes the ops that compute the gradients of the op's inputs. It never
sees numbers. It writes each wanted input gradient to the name
``ctx.input_grad(slot)[i]`` and emits nothing for the ones that are None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from gradgen.program.schema import TensorType


@dataclass(slots=True)
class OpDesc:
    """One op to append: type, ``slot -> [var names]`` for inputs and outputs, attrs."""

    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict[str, Any] = field(default_factory=dict)


def op(type: str, inputs: dict[str, Any], outputs: dict[str, Any], **attrs) -> OpDesc:
    """Shorthand: a slot may be given as one name or a list of names."""
    ins, outs = {}, {}
    for given, slots in ((inputs, ins), (outputs, outs)):
        for k, v in given.items():  # loops, not comprehensions: makers call this for every op they emit
            slots[k] = [v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else [v]
    return OpDesc(type, ins, outs, attrs)


class GradContext(Protocol):
    """What a maker may ask about the forward op it differentiates (see gradgen.framework.passes.backward)."""

    def input(self, slot: str) -> list[str]: ...
    def output(self, slot: str) -> list[str]: ...
    def attr(self, name: str) -> Any: ...
    def var_type(self, name: str) -> TensorType: ...
    def has_output_grad(self, slot: str, i: int = 0) -> bool: ...
    def output_grad(self, slot: str) -> list[str]: ...
    def input_grad(self, slot: str) -> list[str | None]: ...
    def tmp(self, prefix: str) -> str: ...
    # For makers of control-flow ops, which build gradient sub-blocks:
    def output_grad_or_none(self, slot: str, declare: bool = False) -> list[str | None]: ...
    def new_block(self) -> Any: ...
    def gradients(self, block: Any, targets: list[str], target_grads: list[str], inputs: list[str]) -> list[str | None]: ...


Maker = Callable[[Any, GradContext], list[OpDesc]]


def grad_maker(*op_types: str, emits: tuple[str, ...] = ()) -> Callable[[Maker], Maker]:
    """Tag a function as the grad maker of ``op_types``; ``grad_makers/__init__.py`` collects tagged makers.

    ``emits`` lists the op types the maker may append (for ``gradgen ops`` and
    the docs); the gradient tests check every generated op against it.
    """

    def tag(fn: Maker) -> Maker:
        fn.grad_of = tuple(op_types)  # type: ignore[attr-defined]
        fn.emits = tuple(emits)  # type: ignore[attr-defined]
        return fn

    return tag


def summed_back(ctx: GradContext, full_shape, like: str, out: str, build: Callable[[str], list[OpDesc]]) -> list[OpDesc]:
    """``build(target)`` computes a gradient of shape ``full_shape``; sum it back to ``like``'s shape into ``out``.

    When ``like`` statically has ``full_shape``, ``build`` writes ``out``
    directly; otherwise a ``reduce_as`` (the adjoint of broadcasting) follows it.
    This relies on gradgen's broadcasting convention: two -1 dims that meet in
    a broadcast have the same run-time size (as a batch dim does).
    """
    if tuple(ctx.var_type(like).shape) == tuple(full_shape):
        return build(out)
    full = ctx.tmp("full")
    return build(full) + [op("reduce_as", {"X": full, "Target": like}, {"Out": out})]


def only_grad(ctx: GradContext, slot: str, build: Callable[[str], list[OpDesc]]) -> list[OpDesc]:
    """For a rule with one differentiable input ``slot``: ``build(grad_name)``, or nothing when it is not wanted."""
    (grad,) = ctx.input_grad(slot)
    return [] if grad is None else build(grad)
