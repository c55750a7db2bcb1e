"""What every grad maker shares: the tag, the view of the forward op it differentiates, and what it returns.

A grad maker is a pure function ``maker(g, op) -> grads``. ``op`` (a
``GradContext``) describes the forward op: its vars, attrs, compile-time
types and output gradients. ``g`` (a ``builder.Builder``) records the ops that
compute the input gradients. The maker returns ``{input slot: gradient}``, a
list of gradients for a slot of several vars, with None where an input has no
gradient. It never sees numbers and never touches a block: the backward pass
writes each wanted gradient to its name, drops the ops only unwanted ones
needed, and appends the rest.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable, Protocol, Sequence, TypeVar

from gradgen.program.schema import TensorType

from .builder import Builder


class OpView(Protocol):
    """What any rule may ask about its op: slots, attrs and compile-time types (grad makers and tangent rules)."""

    type: str
    attrs: dict[str, Any]

    def attr(self, name: str) -> Any: ...
    def input(self, slot: str) -> str: ...
    def inputs(self, slot: str) -> list[str]: ...
    def input_slots(self) -> dict[str, list[str]]: ...
    def output(self, slot: str) -> str: ...
    def outputs(self, slot: str) -> list[str]: ...
    def var_type(self, name: str) -> TensorType: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    def dtype(self, name: str) -> str: ...


class GradContext(OpView, Protocol):
    """What a maker may ask about the forward op it differentiates (see gradgen.framework.passes.backward)."""

    def grad(self, slot: str) -> str: ...
    def grads(self, slot: str) -> list[str]: ...
    def grads_or_none(self, slot: str) -> list[str | None]: ...
    def has_grad(self, slot: str, i: int = 0) -> bool: ...
    def wanted(self, slot: str) -> list[bool]: ...


Grads = dict[str, Any]
"""Input slot -> its gradient value (or a list of them, one per var of the slot); None: no gradient."""

Maker = Callable[[Builder, GradContext], Grads]


Rule = TypeVar("Rule", bound=Callable)


def tag_rule(kind: str, op_types: Sequence[str], emits: Sequence[str]) -> Callable[[Rule], Rule]:
    """The decorator that tags a rule as ``kind`` (``grad_of``, ``tangent_of``) of ``op_types``, with the op
    types it may record (``emits``; the builder refuses any other)."""

    def tag(fn: Rule) -> Rule:
        setattr(fn, kind, tuple(op_types))
        fn.emits = tuple(emits)  # type: ignore[attr-defined]
        fn.allowed = frozenset(emits)  # type: ignore[attr-defined]
        return fn

    return tag


def gather(families: Iterable[ModuleType], kind: str) -> dict[str, Callable]:
    """Op type -> the function of ``families`` tagged ``kind`` for it; an op type tagged twice fails."""
    table: dict[str, Callable] = {}
    for family in families:
        for fn in vars(family).values():
            for op_type in getattr(fn, kind, ()):
                if op_type in table and table[op_type] is not fn:
                    raise RuntimeError(f"op type '{op_type}' is tagged {kind} by two functions ({family.__name__})")
                table[op_type] = fn
    return table


def grad_maker(*op_types: str, emits: tuple[str, ...]) -> Callable[[Maker], Maker]:
    """Tag a function as the grad maker of ``op_types``; ``grad_makers/__init__.py`` collects tagged makers.

    ``emits`` lists the op types the maker may record (for ``gradgen ops`` and
    the op table in backward.md); the builder refuses any other type.
    """
    return tag_rule("grad_of", op_types, emits)


__all__ = ["OpView", "GradContext", "Grads", "Maker", "tag_rule", "gather", "grad_maker"]
