"""``fluid.layers``: gradgen's layers, plus Paddle 1.x's ``data`` and its ``[1]``-shaped ``mean``.

``mean`` is the one reduction Paddle 1.x code indexes as ``avg_cost[0]``; every
other layer (``accuracy`` included) keeps gradgen's shapes, so a scalar
metric is 0-d and ``float(acc)`` works on every numpy.
"""
from __future__ import annotations

from typing import Sequence

from gradgen.program import layers as _layers
from gradgen.program.layers import *  # noqa: F401,F403  (the facade re-exports every layer under its own name)
from gradgen.program.variable import Variable


def data(name: str, shape: Sequence[int | None], dtype="float32", append_batch_size: bool = True) -> Variable:
    """Paddle 1.x's ``fluid.layers.data``: a batch dim -1 goes in front unless the shape already has a None or -1."""
    shape = list(shape)
    if append_batch_size and all(d is not None and d >= 0 for d in shape):
        shape = [-1] + shape
    return _layers.data(name, shape, dtype)


def mean(x: Variable, name=None) -> Variable:
    """The mean of every element, shaped ``[1]`` as in Paddle 1.x (gradgen's ``layers.mean`` gives a 0-d scalar)."""
    return _layers.reshape(_layers.mean(x), [1], name=name)


__all__ = list(_layers.__all__)
