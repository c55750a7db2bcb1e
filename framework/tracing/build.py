"""Building one program from a Python function of layers: the trace of one call signature.

A fresh ``Program`` pair, one ``layers.data`` var per array argument, the function called on those vars inside
``program_guard``; what it returns are the fetches, and with an optimizer the first of them is the loss that
``optimizer.minimize`` differentiates. Names come from each program's own counters and its startup's seed
sequence, so every trace of one function names and initializes its parameters alike: programs built for two
signatures share their parameters through the function's scope.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

from gradgen.program import Program, layers, program_guard
from gradgen.program.dtypes import is_float
from gradgen.program.variable import Variable

from ..errors import FunctionError
from .outputs import flatten
from .signature import Signature, substituted

__all__ = ["Trace", "trace"]


class Trace(NamedTuple):
    """One signature's programs, the vars each call fetches, and the structure the function returned them in."""

    main: Program
    startup: Program
    fetches: list[Variable]
    template: Any


def _checked_loss(loss: Variable, where: str) -> Variable:
    if tuple(loss.shape) not in ((), (1,)) or not is_float(loss.dtype):
        raise FunctionError(f"{where}: with optimizer= the first value it returns is the loss to minimize, a float "
                            f"scalar; '{loss.name}' is {loss.type_str()} (reduce it first, e.g. layers.mean)")
    return loss


def trace(fn: Callable, bound: inspect.BoundArguments, signature: Signature, optimizer: Any, where: str) -> Trace:
    """Build the programs of ``fn`` for ``signature``: ``bound``'s arrays become data vars, its other values stay."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        fed = {i.name: layers.data(i.name, list(i.shape), i.dtype) for i in signature.inputs}
        args, kwargs = substituted(bound, fed)
        fetches, template = flatten(fn(*args, **kwargs), where)
        if optimizer is not None:
            optimizer.minimize(_checked_loss(fetches[0], where))
    return Trace(main, startup, fetches, template)
