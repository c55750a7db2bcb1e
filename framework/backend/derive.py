"""Deriving an engine's entries from the ops' own math (``OpSchema.compute``): what every engine does the same
way. An engine supplies only how to turn a schema into its kind of entry (a numpy kernel factory, an xla
lowering); ``with_derived`` adds one for every op that states its math, and refuses a hand-written entry for
such an op (a second copy of its math)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.schema import OpSchema

__all__ = ["call_of", "with_derived"]


def call_of(schema: OpSchema, op) -> tuple[dict[str, Any], list[np.dtype]]:
    """The keywords ``compute`` takes for ``op`` (every attr by name) and the dtypes its outputs declare."""
    return ({name: op.attr(name) for name in schema.attrs},
            [np.dtype(op.block.var(n).dtype) for n in op.output_arg_names])


def with_derived(written: Mapping[str, Any], derive: Callable[[OpSchema], Any], engine: str) -> dict[str, Any]:
    """``written`` (op type -> an engine's hand-written entry) and ``derive(schema)`` for every op that has a
    ``compute``; a RuntimeError naming the ops that have both."""
    both = sorted(t for t, s in OP_SCHEMAS.items() if s.compute is not None and t in written)
    if both:
        raise RuntimeError(f"op types with a compute and a hand-written {engine} entry: {both}")
    return {**{t: derive(s) for t, s in OP_SCHEMAS.items() if s.compute is not None}, **written}
