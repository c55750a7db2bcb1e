"""What each var of a block is for: the kind the memory report and the explain page group bytes by.

Resting kinds describe what a run starts from (parameters, feeds, optimizer
state read from the scope); run-made kinds describe the arrays the run
creates: activations the backward part reads later, gradients, staged
updates of persistable vars (held until the run commits), and temporaries
(everything else: a maker's helper values, forward values no grad op reads).
The rule is read from roles and names, so it needs no run.
"""
from __future__ import annotations

import re
from typing import NamedTuple

KINDS = ("parameter", "feed", "optimizer state", "activation", "gradient", "staged update", "temporary")
"""Every kind, in the order the report stacks them."""

KIND_MEANING = {
    "parameter": "trainable or frozen parameters read from the scope",
    "feed": "values fed to the run",
    "optimizer state": "persistable non-parameter vars read from the scope (moments, learning rates)",
    "activation": "forward values kept alive because a backward op reads them",
    "gradient": "gradients x@GRAD and their partial contributions",
    "staged update": "new values of persistable vars, held until the run commits them",
    "temporary": "helper values of grad makers and forward values no backward op reads",
}

KIND_PLURAL = {kind: kind + "s" for kind in KINDS} | {"optimizer state": "optimizer state",
                                                     "temporary": "temporaries"}
"""How a sentence names many vars of a kind ("60% of what the run made is temporaries")."""

_GRADIENT_NAME = re.compile(r".+@GRAD(@RENAME@\d+|@ZERO|@\d+|@GRAD)*")


def is_gradient_name(name: str) -> bool:
    """True for ``x@GRAD``, its partials ``x@GRAD@RENAME@k``, zero fills and renamed ``x@GRAD@1``."""
    return _GRADIENT_NAME.fullmatch(name) is not None


class BlockKinds(NamedTuple):
    """``made[name]``: the kind of a var some op of the block writes; ``resting[name]``: the kind of a var
    the block reads before writing it (from a feed or the scope)."""

    made: dict[str, str]
    resting: dict[str, str]


def block_kinds(block) -> BlockKinds:
    """Classify every var the ops of ``block`` read or write, in one pass over the ops."""
    producer_role: dict[str, str] = {}
    read_by_backward: set[str] = set()
    resting: dict[str, str] = {}
    for op in block.ops:
        for name in op.input_arg_names:
            if name not in producer_role and name not in resting:
                resting[name] = _resting_kind(block.find_var(name))
            if op.role == "backward":
                read_by_backward.add(name)
        for name in op.output_arg_names:
            producer_role.setdefault(name, op.role)
    made = {}
    for name, role in producer_role.items():
        var = block.find_var(name)
        if var is not None and var.persistable:
            made[name] = "staged update"
        elif role == "forward":
            made[name] = "activation" if name in read_by_backward else "temporary"
        elif role == "backward":
            made[name] = "gradient" if is_gradient_name(name) else "temporary"
        else:
            made[name] = "temporary"
    return BlockKinds(made, resting)


def _resting_kind(var) -> str:
    if var is None or not var.persistable:
        return "feed"
    return "parameter" if var.is_parameter else "optimizer state"


__all__ = ["KINDS", "KIND_MEANING", "KIND_PLURAL", "BlockKinds", "block_kinds", "is_gradient_name"]
