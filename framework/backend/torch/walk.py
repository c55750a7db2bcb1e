"""Block 0 as a list of steps, one per op the run needs, in block order: the kernel built from the op, the input
and output names, the declared type of each output, and the vars that die after the step. A run walks it over an
env of torch tensors; nothing leaves torch between ops."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import torch

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.signature import RunSignature, is_persistable
from .kernels import KERNELS
from .xp import torch_dtype

__all__ = ["Step", "build_steps", "walk"]


class Step(NamedTuple):
    fn: Callable[..., Any]
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    types: tuple[tuple[torch.dtype, int, tuple[tuple[int, int], ...]], ...]
    """Per output: the declared dtype, rank and fixed (axis, size) pairs."""
    dead: tuple[str, ...]
    index: int


def _declared(block, name: str):
    var = block.var(name)
    return (torch_dtype(var.dtype), len(var.shape), tuple((a, d) for a, d in enumerate(var.shape) if d != -1))


def build_steps(block, sig: RunSignature) -> list[Step]:
    """The steps of a run of ``block`` with these names (the ops ``sig.skipped`` leaves out are not there)."""
    order = [i for i in range(len(block.ops)) if i not in sig.skipped]
    last_use: dict[str, int] = {}
    for i in order:
        for name in (*block.ops[i].input_arg_names, *block.ops[i].output_arg_names):
            last_use[name] = i
    keep = set(sig.fetches)
    dying: dict[int, list[str]] = {}
    for name, at in last_use.items():
        if name not in keep and not is_persistable(block, name):
            dying.setdefault(at, []).append(name)
    steps = []
    for i in order:
        op = block.ops[i]
        try:
            fn = KERNELS[op.type](op)
        except Exception as e:
            raise ExecutionError(f"{op_location(block, i, op.type, op.callsite)}: cannot build its torch kernel: "
                                 f"{type(e).__name__}: {e}") from e
        outs = tuple(op.output_arg_names)
        steps.append(Step(fn, tuple(op.input_arg_names), outs, tuple(_declared(block, n) for n in outs),
                          tuple(dying.get(i, ())), i))
    return steps


def _wrong_type(value, declared) -> str | None:
    dtype, rank, fixed = declared
    if not isinstance(value, torch.Tensor):
        return f"a {type(value).__name__}, not a tensor"
    if value.dtype != dtype or value.ndim != rank or any(value.shape[a] != d for a, d in fixed):
        return f"{value.dtype}{list(value.shape)}"
    return None


def walk(block, steps: Sequence[Step], env: dict) -> None:
    """Run ``steps`` over ``env`` (name -> tensor): each output stored, checked against its declared dtype and
    shape; dead vars dropped. A kernel's failure or a wrong output type is an ExecutionError naming the op."""
    for fn, ins, outs, types, dead, index in steps:
        try:
            result = fn(*[env[n] for n in ins])
        except Exception as e:
            op = block.ops[index]
            given = ", ".join(f"{n}: {getattr(env.get(n), 'dtype', '?')}{list(getattr(env.get(n), 'shape', []))}"
                              for n in ins)
            raise ExecutionError(f"{op_location(block, index, op.type, op.callsite)} failed: {type(e).__name__}: "
                                 f"{e}; inputs: {given}") from e
        values = (result,) if len(outs) == 1 else result
        if len(values) != len(outs):
            op = block.ops[index]
            raise ExecutionError(f"{op_location(block, index, op.type, op.callsite)}: the torch kernel returned "
                                 f"{len(values)} outputs for {len(outs)} output vars")
        for name, value, declared in zip(outs, values, types):
            wrong = _wrong_type(value, declared)
            if wrong is not None:
                op = block.ops[index]
                raise ExecutionError(f"{op_location(block, index, op.type, op.callsite)}: output '{name}' is {wrong}, "
                                     f"declared {block.var(name).dtype}{list(block.var(name).shape)} (torch kernel)")
            env[name] = value
        for name in dead:
            env.pop(name, None)
