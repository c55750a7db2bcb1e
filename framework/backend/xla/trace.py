"""Tracing a block into jax values: one lowering per op, in block order, each inside a ``jax.named_scope`` that
names the op (``b<block>/op<index>:<type>``), so every instruction of the compiled program says which gradgen
op it came from (``show``), and each output checked against its var's declared type while tracing, so a
lowering that would compute another dtype or shape than the program declares fails at compile time, never
silently at run time.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.conformance import shape_matches
from .context import TraceContext
from .failures import refuse_impossible_size
from .lowerings import LOWERINGS

__all__ = ["scope_name", "trace_block"]


def scope_name(block, index: int, op_type: str) -> str:
    """The name-stack entry of op ``index`` of ``block``: what the compiled program's locations carry."""
    return f"b{block.idx}/op{index}:{op_type}"


def _checked(block, where: str, name: str, value, ctx: TraceContext) -> None:
    """Refuse an output of another type than its var declares, or of a size no array can have (XLA's compiler
    would abort the process); record its size for the errors of the compiled run (``failures``)."""
    shape, dtype = tuple(jnp.shape(value)), np.dtype(jnp.result_type(value))
    ctx.sizes.append((where, name, shape, dtype, refuse_impossible_size(where, name, shape, dtype)))
    var = block.find_var(name)
    if var is None:
        return
    if dtype != np.dtype(var.dtype) or not shape_matches(var.shape, shape):
        raise ExecutionError(f"{where}: its xla lowering makes {name} {dtype.name}{list(shape)}, but the var "
                             f"declares {var.type_str()} (a bug of the lowering: please report it)")


def trace_block(block, env: Mapping[str, Any], fetches: Sequence[str], ctx: TraceContext) -> list:
    """Trace every op of ``block`` on ``env`` (var name -> jax value); return the values of ``fetches``."""
    env = dict(env)
    top = block.idx == 0
    for index, op in enumerate(block.ops):
        if top and index in ctx.precomputed:  # computed on the host, or not run at all
            continue
        where = op_location(block, index, op.type, op.callsite)
        factory = LOWERINGS.get(op.type)
        if factory is None:
            raise ExecutionError(f"{where}: the xla backend has no lowering for op type '{op.type}'")
        names = op.output_arg_names
        with jax.named_scope(scope_name(block, index, op.type)):
            ctx.where = where
            try:
                result = factory(op, ctx)(*[env[n] for n in op.input_arg_names])
            except ExecutionError:
                raise
            except Exception as e:  # a lowering refusing attrs or shapes: report it where the op is
                raise ExecutionError(f"{where}: cannot lower it to xla: {type(e).__name__}: {e}") from e
        values = (result,) if len(names) == 1 else tuple(result)
        if len(values) != len(names):
            raise ExecutionError(f"{where}: its xla lowering returned {len(values)} outputs for {len(names)} vars")
        for name, value in zip(names, values):
            _checked(block, where, name, value, ctx)
            env[name] = value
    return [env[n] for n in fetches]
