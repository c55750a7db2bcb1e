"""The numpy backend, the reference interpreter: numpy kernels run one op at a time, in block order.

``make_runner`` is what the executor gets (``backend.runner("numpy", ...)``): plans (``plan``, ``plan_data``)
cached per program, the run loop (``run``), the kernels (``kernels/``), the BLAS (``blas``), the per-op checks
(``checks``). Nothing is fused, reordered or written into a buffer another op owns: every other engine is
checked against this one. design_docs/executor.md describes it.
"""
from __future__ import annotations

from .plan_data import PlanOptions
from .runner import make_runner

__all__ = ["PlanOptions", "make_runner"]
