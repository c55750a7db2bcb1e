"""The one kernel signature, and the helpers every family uses to keep it.

A kernel is a factory ``kernel(op) -> fn``: work that depends only on the
op's attrs and its vars' static types happens once, in the factory. ``fn``
takes the op's input arrays, flat in schema slot order, and returns its
output array (or a tuple of them, flat in schema slot order).

A kernel that can write its result into a buffer the plan owns says so in
its signature, with a keyword-only ``out``: ``fn(*inputs, out=None)``. It
writes into ``out`` only when ``out`` has exactly the result's shape and
dtype (``fits``), else it allocates; the values are the same either way, and
the result is returned either way. For an op with several outputs ``out`` is
a tuple of buffers, one per output. A factory declines buffers for attrs or
ranks it does not handle by returning a function without ``out``.

A bare numpy ufunc is a kernel too, and the cheapest one (no Python frame).
It takes ``out`` when it maps floats to floats of the same type (``np.add``,
``np.tanh``; not ``np.less``), but it would broadcast into a buffer bigger
than its result or cast into one of another dtype, so ``with_out`` wraps it
to accept only a buffer like every input, of a dtype it maps to itself; the
plan uses that wrapper only for steps that have a buffer.

Kernels never modify their inputs; returning an input unchanged is allowed
(only by a function without ``out``, so a plan buffer never holds someone's
input).

Control-flow kernels take their compiled sub-blocks as a second factory
argument: ``kernel(op, blocks)``, ``blocks[key](env)`` running the sub-block
``SubBlock`` ``key`` names and returning its fetches (see ``control_flow``).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

__all__ = ["KernelFactory", "SubBlock", "declares", "fits", "result_array", "takes_out", "with_out"]

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


def fits(out: Any, *likes: Any) -> bool:
    """True when ``out`` is an array of exactly the shape and dtype of each of ``likes``."""
    if out is None:
        return False
    for like in likes:
        if out.shape != like.shape or out.dtype != like.dtype:
            return False
    return True


def result_array(out: Any, shape: Sequence[int], dtype) -> np.ndarray:
    """The plan's buffer ``out`` if it is a C-contiguous array of ``shape`` and ``dtype``, else a new (empty)
    array: what a kernel taking ``out`` writes its result into."""
    if out is not None and out.shape == tuple(shape) and out.dtype == dtype and out.flags.c_contiguous:
        return out
    return np.empty(shape, dtype)


def takes_out(fn: Callable[..., Any]) -> bool:
    """True when kernel function ``fn`` can write into a plan buffer: a numpy ufunc, or a function that
    declares a keyword-only ``out``.

    The signature is the declaration, so there is no second table to keep in
    step. Anything else (a ``partial``, a builtin) counts as not taking
    ``out``: the plan then simply gives it no buffer.
    """
    if isinstance(fn, np.ufunc):
        return "d" in _same_type_loops(fn)
    return declares(fn, "out")


def declares(fn: Callable[..., Any], keyword: str) -> bool:
    """True when the Python function ``fn`` declares a keyword-only parameter ``keyword``: how a kernel
    function says it takes ``out``, and a factory that it wants to know which outputs the plan drops unread
    (``dropped``)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    return keyword in code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]


@lru_cache(maxsize=None)
def _same_type_loops(ufunc: np.ufunc) -> frozenset[str]:
    """Type codes ``c`` for which ``ufunc`` has a loop from ``c`` inputs to a ``c`` output (``dd->d``)."""
    return frozenset(t[0] for t in ufunc.types if len(set(t.replace("->", ""))) == 1)


def with_out(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Kernel function ``fn`` (one that ``takes_out``) as a function that checks the fit of ``out`` itself.

    That is ``fn``, except for a bare ufunc, which gets ``out`` only when it has the shape and dtype of every
    input and the ufunc maps that dtype to itself (same-shape, same-type work: anything else allocates).
    """
    if not isinstance(fn, np.ufunc):
        return fn
    same = _same_type_loops(fn)

    def run(*args, out=None):
        if fits(out, *args) and out.dtype.char in same:
            return fn(*args, out=out)
        return fn(*args)

    return run
