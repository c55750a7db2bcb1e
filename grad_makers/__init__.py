"""gradgen's gradient rules: one grad-op maker per forward op type (or family), IR -> IR.

    from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE

A maker is a pure function ``maker(g, op) -> {input slot: gradient}`` written
with the expression builder ``g`` (``builder.py``); ``families.py`` turns the
common shapes of rules into one-line registrations. Makers are tagged with
``@grad_maker(...)`` (or made by a family helper) in the family modules listed
in ``FAMILIES`` below and gathered here; nothing registers itself on import.
"""
from __future__ import annotations

from types import ModuleType

from . import (activation, control_flow, conv, custom, elementwise, grad_ops, indexing, linalg, manipulation,
               network, nn, normalization, recurrent, reduction, scan, special)
from .base import GradContext, Grads, Maker, gather, grad_maker
from .builder import Builder, OpDesc, Ref, RuleError, SubBlock

FAMILIES: tuple[ModuleType, ...] = (activation, elementwise, linalg, reduction, manipulation, nn, grad_ops, conv,
                                    network, normalization, control_flow, special, scan, indexing, custom, recurrent)

GRAD_MAKERS: dict[str, Maker] = gather(FAMILIES, "grad_of")
"""op type -> its grad maker."""

NON_DIFFERENTIABLE: frozenset[str] = frozenset({
    # comparisons and integer-valued results: no gradient flows through them
    "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal", "argmax", "argmin", "argsort",
    "one_hot",
    # metrics: counts and ratios of counts, which a small change of the scores does not move
    "accuracy", "precision_recall", "auc",
    "sign", "logical_and", "logical_or", "logical_xor", "logical_not",
    # tensors made from attrs or only from an input's shape
    "fill_constant", "uniform_random", "gaussian_random", "fill_any_like", "fill_zeros_like",
    # optimizer updates
    "sgd", "momentum", "adam", "adamw", "lamb", "rmsprop", "adagrad", "global_norm", "clip_by_global_norm",
    # communication between data-parallel ranks
    "allreduce_start", "allreduce_wait", "broadcast",
    # the step counter and learning-rate schedules
    "increment", "piecewise_decay", "exponential_decay", "cosine_decay", "linear_lr_warmup",
})
"""Op types that have no gradient: the backward pass lets no gradient through them."""

__all__ = ["GRAD_MAKERS", "NON_DIFFERENTIABLE", "FAMILIES", "Builder", "SubBlock", "Ref", "OpDesc", "RuleError",
           "GradContext", "Grads", "Maker", "grad_maker"]
