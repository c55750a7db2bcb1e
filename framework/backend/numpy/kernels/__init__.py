"""One numpy kernel per op type, gathered from one module per family (as the schemas are).

The kernel signature (a factory of a plain function of the op's input
arrays) is described in ``signature``. Each family module has a ``KERNELS``
dict; the control-flow family also has ``SUBBLOCKS``, which says which
sub-blocks an op runs and what they bind, so that the plan can compile them
before it builds the op's kernel.
"""
from __future__ import annotations

from typing import Callable, Mapping

from . import (collective, control_flow, conv, creation, custom, elementwise, grad_ops, indexing,
               linalg, logic, lr_schedule, manipulation, metrics, network, nn, normalization, optimizer, recurrent,
               reduction)
from gradgen.program.ops import OP_SCHEMAS

from .derived import derived_kernels
from .signature import KernelFactory, SubBlock

__all__ = ["FAMILIES", "KERNELS", "SUBBLOCKS", "KernelFactory", "SubBlock"]

FAMILIES = (creation, elementwise, linalg, reduction, manipulation, logic, nn, grad_ops, optimizer,
            conv, network, normalization, control_flow, collective, lr_schedule, indexing, custom, recurrent, metrics)


def _collect(families, table_name: str) -> dict:
    table: dict = {}
    for family in families:
        for op_type, entry in getattr(family, table_name, {}).items():
            if op_type in table:
                raise RuntimeError(f"op type '{op_type}' has two {table_name} entries ({family.__name__})")
            table[op_type] = entry
    return table


def _with_derived(written: dict) -> dict:
    """The hand-written kernels and one derived from each other op's ``compute``; an op may not have both (a
    hand-written kernel for an op that states its math is a second copy of it)."""
    derived = derived_kernels(OP_SCHEMAS)
    both = sorted(set(derived) & set(written))
    if both:
        raise RuntimeError(f"op types with a compute and a hand-written numpy kernel: {both}")
    return {**derived, **written}


KERNELS: Mapping[str, KernelFactory] = _with_derived(_collect(FAMILIES, "KERNELS"))
"""op type -> kernel factory: derived from the op's ``compute`` (``derived``), or the family modules' own."""

SUBBLOCKS: Mapping[str, Callable[..., Mapping[str, SubBlock]]] = _collect(FAMILIES, "SUBBLOCKS")
"""op type -> ``blocks(op)``: the sub-blocks the op's kernel runs, by the key its factory looks them up with."""
