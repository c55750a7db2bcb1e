"""The seeded random draws, made on the host with numpy for every engine: the numpy kernels call them, and the
xla backend draws block 0's random ops with them before each run (``xla/compile.py``) and a sub-block's while
tracing or through a host callback (``xla/lowerings/creation.py``), so both engines give the same numbers, bit for
bit."""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["random_draw", "random_sample", "random_stream"]

_SAMPLERS = {"uniform_random": ("uniform", "min", "max"), "gaussian_random": ("normal", "mean", "std")}
"""Random op type -> (the numpy Generator method, the attrs it takes in order)."""


def random_sample(op, generator: np.random.Generator) -> np.ndarray:
    """One sample of random op ``op`` drawn from ``generator``. PCG64 and its float streams are defined by numpy,
    not the platform: the same values everywhere."""
    method, *params = _SAMPLERS[op.type]
    drawn = getattr(generator, method)(*[op.attr(p) for p in params], size=tuple(op.attr("shape")))
    return drawn.astype(op.attr("dtype"), copy=False)


def random_stream(op) -> np.random.Generator:
    """The generator op ``op``'s ``seed`` starts."""
    return np.random.Generator(np.random.PCG64(op.attr("seed")))


def random_draw(op) -> Callable[[], np.ndarray]:
    """``draw()`` -> the op's sample of this run: from a new generator every run (the same sample every run), or
    with ``redraw`` from one generator kept by whoever keeps ``draw`` (a plan, a compiled block): a new sample
    every run, the same sequence from the same seed, as dropout's masks."""
    if op.attr("redraw"):
        stream = random_stream(op)
        return lambda: random_sample(op, stream)
    return lambda: random_sample(op, random_stream(op))

