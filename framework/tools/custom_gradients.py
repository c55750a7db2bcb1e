"""Checking a custom gradient rule, and finding the custom rules in a program.

A rule made with ``layers.custom_gradient`` replaces the derivative of its
forward body. ``check_custom_gradient`` says how far the rule is from that
derivative (finite differences of the forward body), which is zero for a
rule that only computes it more stably and large, by design, for a
straight-through estimator or a clipped gradient.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from gradgen.program import Program, layers, program_guard

from ..passes.backward import gradients
from ..runtime.scope import Scope
from .gradcheck import GradReport, check_gradients


def check_custom_gradient(fn: Callable, inputs: Mapping[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-7,
                          seed: int = 0) -> list[GradReport]:
    """Compare the gradient ``fn`` builds (for a random output weighting) with finite differences of its forward
    body, per input. ``fn`` is a function of vars, such as the one ``layers.custom_gradient`` returns;
    ``inputs`` maps names to float64 arrays."""
    rng = np.random.default_rng(seed)
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, list(a.shape), str(a.dtype)) for n, a in inputs.items()]
        outs = fn(*xs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        weights = [layers.data(f"{y.name}@weight", list(y.shape), y.dtype) for y in outs]
        terms = [layers.reduce_sum(layers.multiply(y, w)) for y, w in zip(outs, weights)]
        loss = terms[0] if len(terms) == 1 else layers.sum(terms)
        grads = gradients(loss, xs)
    feed = {**inputs, **{w.name: rng.standard_normal(w.shape) for w in weights}}
    pairs = {x.name: g.name for x, g in zip(xs, grads) if g is not None}
    return check_gradients(main, loss.name, pairs, feed, Scope(), rtol=rtol, atol=atol)


def custom_rules(program) -> list[tuple[int, int, str]]:
    """``(block, op index, rule name)`` of every ``custom_gradient`` op in ``program``."""
    return [(b.idx, i, op.attr("rule")) for b in program.blocks for i, op in enumerate(b.ops)
            if op.type == "custom_gradient"]


__all__ = ["check_custom_gradient", "custom_rules"]
