"""One numpy kernel per op type, gathered from one module per family (as the schemas are).

A kernel is a factory: given the Operator (its attrs and its vars' static
types), it returns a function from the op's input arrays, flat in schema slot
order, to its output array (or a tuple of them, flat in schema slot order).
Work that depends only on attrs happens once, in the factory, not per run.
Kernels never modify their inputs; returning an input unchanged is allowed.
A family may also offer ``INTO`` kernels that write into a buffer the plan owns.
"""
from __future__ import annotations

from typing import Any, Callable

from . import (activation, collective, control_flow, conv, creation, elementwise, grad_ops, linalg, logic,
               lr_schedule, manipulation, network, nn, optimizer, reduction)

KernelFactory = Callable[[Any], Callable[..., Any]]

FAMILIES = (creation, elementwise, activation, linalg, reduction, manipulation, logic, nn, grad_ops, optimizer,
            conv, network, control_flow, collective, lr_schedule)


def _collect(families, table_name: str = "KERNELS") -> dict[str, KernelFactory]:
    table: dict[str, KernelFactory] = {}
    for family in families:
        for op_type, factory in getattr(family, table_name, {}).items():
            if op_type in table:
                raise RuntimeError(f"op type '{op_type}' has two kernels ({family.__name__})")
            table[op_type] = factory
    return table


KERNELS: dict[str, KernelFactory] = _collect(FAMILIES)
"""op type -> kernel factory."""

INTO: dict[str, KernelFactory] = _collect(FAMILIES, "INTO")
"""op type -> factory of a kernel that takes one more argument, ``buf``: an array it may write its result
into when ``buf`` has exactly the result's shape and dtype (else it allocates, as the plain kernel does).
It returns the result, like the plain kernel, and computes exactly the same values. A factory may return
None to decline (say, for ranks it does not handle)."""
