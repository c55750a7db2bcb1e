"""The one kernel signature, and the helpers every family uses to keep it.

A kernel is a factory ``kernel(op) -> fn``: work that depends only on the
op's attrs and its vars' static types happens once, in the factory. ``fn``
takes the op's input arrays, flat in schema slot order, and returns its
output array (or a tuple of them, flat in schema slot order).

A bare numpy ufunc is a kernel too (``np.exp``), and the cheapest one.

Kernels never modify their inputs, and every result is theirs to give away: a
kernel keeps no array between calls that a later call could write (returning
an input unchanged is allowed, as ``assign`` does).

Control-flow kernels take their compiled sub-blocks as a second factory
argument: ``kernel(op, blocks)``, ``blocks[key](env)`` running the sub-block
``SubBlock`` ``key`` names and returning its fetches (see ``control_flow``).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

__all__ = ["KernelFactory", "SubBlock", "declares"]

KernelFactory = Callable[..., Callable[..., Any]]
"""``factory(op) -> fn``, or ``factory(op, blocks) -> fn`` for an op that owns sub-blocks; a factory declaring a
keyword-only ``dropped`` also gets the names of its op's outputs that nothing after it reads (it may skip them)."""


class SubBlock(NamedTuple):
    """A sub-block a control-flow op runs: its index, the names a run binds (feeds), the names it returns, and
    the indexes of ops it leaves out (their outputs are fed: a gradient loop reading its forward body back)."""

    block: int
    feeds: Sequence[str]
    fetches: Sequence[str]
    skip: frozenset[int] = frozenset()


def declares(fn: Callable[..., Any], keyword: str) -> bool:
    """True when the Python function ``fn`` declares a keyword-only parameter ``keyword``: how a factory says
    it wants to know which outputs the plan drops unread (``dropped``), or a loop's read-back link (``stash``)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    return keyword in code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
