"""Forward-mode tangent rules: one per differentiable op type (or family), IR -> IR, like the grad makers.

    from gradgen.grad_makers.tangents import TANGENT_RULES

A rule is a pure function ``rule(g, op) -> {output slot: tangent}`` written
with the makers' expression builder (``tangent_rules.py`` says what ``op``
answers). Each rule sits in the grad-maker module of its op's family, beside
the op's grad maker, tagged with ``@tangent_rule(...)`` (or made by a helper
of ``tangent_rules``); they are gathered here from the same ``FAMILIES`` as the
makers, and nothing registers itself on import. Every op type with a grad
maker has a tangent rule (a test checks), so forward mode covers every op
reverse mode does.
"""
from __future__ import annotations

from types import ModuleType
from typing import Iterable

from . import FAMILIES
from .base import gather
from .tangent_rules import TangentContext, TangentRule, Tangents, by_name, linear_in, tangent_rule, total


def collect(families: Iterable[ModuleType]) -> dict[str, TangentRule]:
    """Op type -> its tangent rule, from the tagged functions of ``families``; an op type tagged twice fails."""
    return gather(families, "tangent_of")


TANGENT_RULES: dict[str, TangentRule] = collect(FAMILIES)
"""op type -> its tangent rule."""

__all__ = ["TANGENT_RULES", "FAMILIES", "collect", "TangentContext", "TangentRule", "Tangents", "tangent_rule",
           "linear_in", "by_name", "total"]
