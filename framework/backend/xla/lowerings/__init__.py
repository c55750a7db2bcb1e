"""One xla lowering per op type, gathered from one module per family, named as the numpy kernels' families
(``backend/numpy/kernels/``) and gathered the same way (``shared/tables``): an op's lowering sits in the file of the
same name as its kernel's.

A lowering is ``LOWERINGS[op.type](op, ctx) -> fn`` (``context``): the numpy kernels' factory with a trace
context; ``fn`` takes the op's input values as jax arrays and returns its outputs. An op that states its math
(``OpSchema.compute``) has its lowering derived (``derived``), never written here.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

from . import (collective, control_flow, conv, creation, custom, indexing, linalg,
               metrics, network, recurrent)
from ...derive import with_derived, with_primitives
from ...shared.tables import collect
from .derived import derived_lowering
from .. import xp

__all__ = ["FAMILIES", "LOWERINGS", "XP"]

FAMILIES = (creation, linalg,
            conv, network, control_flow, collective, indexing, custom, recurrent, metrics)

XP = with_primitives(xp.XP, collect(FAMILIES, "PRIMITIVES"))
"""The ``xp`` an op's ``compute`` is traced over here: ``jax.numpy`` (``xp``) and the families' ``PRIMITIVES`` (the
convolution)."""

LOWERINGS: Mapping[str, Callable] = with_derived(collect(FAMILIES, "LOWERINGS"), partial(derived_lowering, xp=XP),
                                                 "xla lowering")
"""op type -> ``lowering(op, ctx) -> fn``: derived from the op's ``compute`` (``derived``), or the family modules'
own."""
