"""One numpy kernel per op type, gathered from one module per family (as the schemas are; ``shared/tables``).

The kernel signature (a factory of a plain function of the op's input
arrays) is described in ``signature``. Each family module has a ``KERNELS``
dict; the control-flow family also has ``SUBBLOCKS``, which says which
sub-blocks an op runs and what they bind, so that the plan can compile them
before it builds the op's kernel.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

from . import (collective, control_flow, conv, creation, custom, grad_ops, indexing,
               linalg, manipulation, metrics, network, normalization, recurrent)
from ...derive import with_derived, with_primitives
from ...shared.tables import collect
from .derived import derived_kernel
from .signature import KernelFactory, SubBlock
from .. import xp

__all__ = ["FAMILIES", "FASTER", "KERNELS", "SUBBLOCKS", "XP", "KernelFactory", "SubBlock"]

FAMILIES = (creation, linalg, manipulation, grad_ops,
            conv, network, normalization, control_flow, collective, indexing, custom, recurrent, metrics)

FASTER: Mapping[str, str] = collect(FAMILIES, "FASTER")
"""op type -> why its hand-written kernel stays although the op states its math (a measurement)."""

XP = with_primitives(xp.XP, collect(FAMILIES, "PRIMITIVES"))
"""The ``xp`` an op's ``compute`` runs over here: numpy (``xp``) and the families' ``PRIMITIVES`` (the convolution)."""

KERNELS: Mapping[str, KernelFactory] = with_derived(collect(FAMILIES, "KERNELS"), partial(derived_kernel, xp=XP),
                                                    "numpy kernel", FASTER)
"""op type -> kernel factory: derived from the op's ``compute`` (``derived``), or the family modules' own."""

SUBBLOCKS: Mapping[str, Callable[..., Mapping[str, SubBlock]]] = collect(FAMILIES, "SUBBLOCKS")
"""op type -> ``blocks(op)``: the sub-blocks the op's kernel runs, by the key its factory looks them up with."""
