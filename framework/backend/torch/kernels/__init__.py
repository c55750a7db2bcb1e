"""The torch engine's kernel table: one factory per op type, ``factory(op) -> fn(*input tensors)`` returning the
output tensor or a tuple of them (the numpy kernels' signature, over torch tensors). Derived from the op's
``compute`` (``derived``) where it has one, else hand-written in the family file of the numpy kernels' name
(``creation``, ``linalg``, ``manipulation``, ``grad_ops``, ``nn``, ``normalization``, ``conv``; ``kept`` and
``finite`` are helpers they share); an op in neither is refused (``refused.problems``)."""
from __future__ import annotations

from typing import Callable, Mapping

from ...derive import with_derived
from ...shared.tables import collect
from . import conv, creation, grad_ops, linalg, manipulation, nn, normalization
from .derived import derived_kernel

__all__ = ["FAMILIES", "FASTER", "JOINT", "KERNELS"]

FAMILIES = (creation, linalg, manipulation, grad_ops, nn, normalization, conv)

FASTER: Mapping[str, str] = collect(FAMILIES, "FASTER")
"""op type -> why its hand-written kernel stays although the op states its math (a measurement)."""

KERNELS: Mapping[str, Callable] = with_derived(collect(FAMILIES, "KERNELS"), derived_kernel, "torch kernel", FASTER)
"""op type -> kernel factory."""

JOINT: Mapping[tuple[str, str], Callable] = collect(FAMILIES, "JOINT")
"""(first op type, second op type) -> factory(first op, second op) of one kernel computing both ops' outputs from
the first op's inputs (``joint.pairs`` says when two ops may share one)."""
