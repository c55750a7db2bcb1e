"""The one kernel signature, and the helpers every family uses to keep it.

A kernel is a factory ``kernel(op) -> fn``: work that depends only on the
op's attrs and its vars' static types happens once, in the factory. ``fn``
takes the op's input arrays, flat in schema slot order, and returns its
output array (or a tuple of them, flat in schema slot order).

A kernel that can write its result into a buffer the plan owns says so in
its signature, with a keyword-only ``out``: ``fn(*inputs, *, out=None)``.
It writes into ``out`` only when ``out`` has exactly the result's shape and
dtype (``fits``), else it allocates; the values are the same either way, and
the result is returned either way. For an op with several outputs ``out`` is
a tuple of buffers, one per output. A factory declines buffers for attrs or
ranks it does not handle by returning a function without ``out``. Kernels
never modify their inputs; returning an input unchanged is allowed (only by
a function without ``out``, so a plan buffer never holds someone's input).

Control-flow kernels take their compiled sub-blocks as a second factory
argument: ``kernel(op, blocks)``, ``blocks[key](env)`` running the sub-block
``SubBlock`` ``key`` names and returning its fetches (see ``control_flow``).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

__all__ = ["KernelFactory", "SubBlock", "fits", "takes_out"]

KernelFactory = Callable[..., Callable[..., Any]]
"""``factory(op) -> fn``, or ``factory(op, blocks) -> fn`` for an op that owns sub-blocks."""


class SubBlock(NamedTuple):
    """A sub-block a control-flow op runs: its index, the names a run binds (feeds), the names it returns."""

    block: int
    feeds: Sequence[str]
    fetches: Sequence[str]


def fits(out: Any, *likes: Any) -> bool:
    """True when ``out`` is an array of exactly the shape and dtype of each of ``likes``."""
    if out is None:
        return False
    for like in likes:
        if out.shape != like.shape or out.dtype != like.dtype:
            return False
    return True


def takes_out(fn: Callable[..., Any]) -> bool:
    """True when kernel function ``fn`` declares a keyword-only ``out``: it can write into a plan buffer.

    The signature is the declaration, so there is no second table to keep in
    step. Anything that is not a plain Python function (a numpy ufunc, a
    ``partial``) counts as not taking ``out``: the plan then simply gives it
    no buffer.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    return "out" in kwonly
