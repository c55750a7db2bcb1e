"""The torch engine's kernel table: one factory per op type, ``factory(op) -> fn(*input tensors)`` returning the
output tensor or a tuple of them (the numpy kernels' signature, over torch tensors). Derived from the op's
``compute`` (``derived``) where it has one, else hand-written in the family file of the numpy kernels' name
(``creation``, ``linalg``, ``grad_ops``, ``normalization``, ``conv``, ``recurrent``: the LSTM on oneDNN's RNN
primitive, the GRU on ATen's recurrence, its gradient by autograd, each step by step where those do not run the op
as the reference does, ``recurrence``), or of the op's own family where numpy derives it (``network``: layer norm's
gradient; ``nn``: the softmax cross-entropy); an op whose schema names one ATen call (``OpSchema.aten``) is derived,
on that call where its values allow (``derived``); ``kept`` and ``finite`` are helpers they share. An op in neither
is refused (``refused.problems``).
``metrics`` holds only the metrics' primitive (``xp.tally``); ``indexing`` only rows written at positions
(``xp.scatter_rows``)."""
from __future__ import annotations

from functools import partial
from typing import Callable, Mapping

from ...derive import with_derived, with_primitives
from ...shared.tables import collect
from . import conv, creation, grad_ops, indexing, linalg, metrics, network, nn, normalization, recurrent
from .derived import derived_kernel
from .. import xp

__all__ = ["FAMILIES", "FASTER", "JOINT", "KERNELS", "XP"]

FAMILIES = (creation, linalg, grad_ops, normalization, network, nn, conv, indexing, metrics, recurrent)

FASTER: Mapping[str, str] = collect(FAMILIES, "FASTER")
"""op type -> why its hand-written kernel stays although the op states its math (a measurement)."""

XP = with_primitives(xp.XP, collect(FAMILIES, "PRIMITIVES"))
"""The ``xp`` an op's ``compute`` runs over here: torch under numpy's names (``xp``) and the families'
``PRIMITIVES`` (the convolution, the metrics' tally)."""

KERNELS: Mapping[str, Callable] = with_derived(collect(FAMILIES, "KERNELS"), partial(derived_kernel, xp=XP),
                                               "torch kernel", FASTER)
"""op type -> kernel factory."""

JOINT: Mapping[tuple[str, str], Callable] = collect(FAMILIES, "JOINT")
"""(first op type, second op type) -> factory(first op, second op) of one kernel computing both ops' outputs from
the first op's inputs (``joint.pairs`` says when two ops may share one)."""
