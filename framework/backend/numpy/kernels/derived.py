"""Kernels derived from the ops' own math: every schema with a ``compute`` (``OpSchema.compute``) runs it with
``xp = numpy``. The result is cast to the dtype the op declares only where it differs, so a formula that keeps
its input's dtype (all of them, in numpy 2's promotion) costs no copy."""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from gradgen.program.schema import OpSchema

from ..xp import XP
from .signature import KernelFactory

__all__ = ["derived_kernels"]


def _as(value, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


def _factory(schema: OpSchema) -> KernelFactory:
    compute, attr_names = schema.compute, tuple(schema.attrs)

    def factory(op) -> Callable[..., np.ndarray]:
        attrs = {name: op.attr(name) for name in attr_names}
        dtypes = [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names]
        if len(dtypes) == 1:
            (dtype,) = dtypes
            return lambda *arrays: _as(compute(XP, *arrays, **attrs), dtype)
        return lambda *arrays: tuple(_as(v, d) for v, d in zip(compute(XP, *arrays, **attrs), dtypes))

    return factory


def derived_kernels(schemas: Mapping[str, OpSchema]) -> dict[str, KernelFactory]:
    """op type -> a kernel factory running the op's ``compute`` on numpy, for every schema that has one."""
    return {t: _factory(s) for t, s in schemas.items() if s.compute is not None}
