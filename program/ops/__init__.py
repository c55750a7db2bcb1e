"""The schema registry: every op type gradgen knows, gathered from one module per family.

There is no registration by import side effect: a family module defines a
``SCHEMAS`` tuple and is listed here.
"""
from __future__ import annotations

from ..schema import OpSchema
from . import (activation, collective, control_flow, conv, creation, custom, elementwise, grad_ops, indexing,
               linalg, logic, lr_schedule, manipulation, metrics, network, nn, optimizer, recurrent, reduction)

FAMILIES = (creation, elementwise, activation, linalg, reduction, manipulation, logic, nn, grad_ops, optimizer,
            conv, network, control_flow, collective, lr_schedule, indexing, custom, recurrent, metrics)


def _collect(families) -> dict[str, OpSchema]:
    table: dict[str, OpSchema] = {}
    for family in families:
        for s in family.SCHEMAS:
            if s.type in table:
                raise RuntimeError(f"op type '{s.type}' is declared twice ({family.__name__})")
            table[s.type] = s
    return table


OP_SCHEMAS: dict[str, OpSchema] = _collect(FAMILIES)
"""op type -> schema, for every op type."""


__all__ = ["FAMILIES", "OP_SCHEMAS"]
