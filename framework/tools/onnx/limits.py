"""How much an ONNX import may build from a model's declared sizes (a module without onnx, for the CLI's flags)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ImportLimits"]


@dataclass(frozen=True)
class ImportLimits:
    """Bounds on what an import may build from a model's declared sizes (a 107-byte model can ask for 1.3 GiB).

    ``max_constant_bytes``: the largest tensor the import itself materialises (a ``ConstantOfShape``, the index
    of a strided ``Slice`` or of ``ArgMax(select_last_index=1)``); ``max_loop_iterations``: the ``max_iterations``
    of the while loop a ``Loop`` becomes (a run that would take more steps is an error, not an endless run; ONNX
    exporters put INT64_MAX in a trip count that only bounds a loop ended by its condition)."""

    max_constant_bytes: int = 256 * 2 ** 20
    max_loop_iterations: int = 10 ** 6
