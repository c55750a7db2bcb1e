"""The reference's einsum, which the engines that compute eagerly share: numpy's, contracting pairs of operands
through BLAS in its ``optimize`` order where there are several (rather than one loop over every index). The
order groups the products, so an engine that contracts otherwise can meet inf - inf where this one overflows to
inf (``design_docs/numerics.md``): the torch engine takes this one for three or more float operands."""
from __future__ import annotations

import numpy as np

__all__ = ["reference_einsum"]


def reference_einsum(equation: str, *operands: np.ndarray) -> np.ndarray:
    """numpy's einsum of ``operands`` on ``equation``, pairs contracted in numpy's optimized order."""
    return np.einsum(equation, *operands, optimize=len(operands) > 1)
