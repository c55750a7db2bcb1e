"""Block 0 as a list of steps, one per op the run needs, in block order: the kernel built from the op, the input
and output names, the declared type of each output, and the vars that die after the step. A run walks it over an
env of torch tensors; nothing leaves torch between ops."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import torch

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.signature import RunSignature, is_persistable
from .joint import pairs
from .kernels import JOINT, KERNELS
from .xp import torch_dtype

__all__ = ["Step", "Timer", "build_steps", "walk"]


class Step(NamedTuple):
    fn: Callable[..., Any]
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    types: tuple[tuple[torch.dtype, int, tuple[tuple[int, int], ...]], ...]
    """Per output: the declared dtype, rank and fixed (axis, size) pairs."""
    dead: tuple[str, ...]
    ops: tuple[int, ...]
    """The op indexes the step runs: its own, or a joint pair's two (``joint.pairs``), in block order."""


def _declared(block, name: str):
    var = block.var(name)
    return (torch_dtype(var.dtype), len(var.shape), tuple((a, d) for a, d in enumerate(var.shape) if d != -1))


def _kernel(block, i: int, make: Callable[[], Callable]) -> Callable:
    try:
        return make()
    except Exception as e:
        op = block.ops[i]
        raise ExecutionError(f"{op_location(block, i, op.type, op.callsite)}: cannot build its torch kernel: "
                             f"{type(e).__name__}: {e}") from e


Timer = Callable[[Callable[..., Any], tuple[int, ...], str], Callable[..., Any]]
"""``timer(fn, ops, kind)``: ``fn``, the kernel of ops ``ops`` (indexes), timed into a profile's row for them
(``runtime/profile.Profiler.timed``, given the block)."""


def build_steps(block, sig: RunSignature, timer: Timer | None = None) -> list[Step]:
    """The steps of a run of ``block`` with these names (the ops ``sig.skipped`` leaves out are not there); a pair
    of ops one kernel serves (``joint.pairs``) is one step at the first op's place. With ``timer`` (a profiling
    executor's), each step's kernel is timed into the profile's row of its op or pair (kind ``first+second``)."""
    order = [i for i in range(len(block.ops)) if i not in sig.skipped]
    joined = pairs(block, order)
    seconds = set(joined.values())
    planned = []  # (op indexes, kernel, input names, output names)
    for i in order:
        if i in seconds:
            continue
        ops = (i, joined[i]) if i in joined else (i,)
        run = [block.ops[k] for k in ops]
        types = tuple(op.type for op in run)
        fn = _kernel(block, i, lambda: JOINT[types](*run) if len(run) > 1 else KERNELS[types[0]](run[0]))
        if timer is not None:
            fn = timer(fn, ops, "+".join(types))
        planned.append((ops, fn, tuple(run[0].input_arg_names), tuple(n for op in run for n in op.output_arg_names)))
    last_use: dict[str, int] = {}
    for at, (_, _, ins, outs) in enumerate(planned):
        for name in (*ins, *outs):
            last_use[name] = at
    keep = set(sig.fetches)
    dying: dict[int, list[str]] = {}
    for name, at in last_use.items():
        if name not in keep and not is_persistable(block, name):
            dying.setdefault(at, []).append(name)
    return [Step(fn, ins, outs, tuple(_declared(block, n) for n in outs), tuple(dying.get(at, ())), ops)
            for at, (ops, fn, ins, outs) in enumerate(planned)]


def _wrong_type(value, declared) -> str | None:
    dtype, rank, fixed = declared
    if not isinstance(value, torch.Tensor):
        return f"a {type(value).__name__}, not a tensor"
    shape = value.shape
    if value.dtype != dtype or len(shape) != rank:
        return f"{value.dtype}{list(shape)}"
    for axis, size in fixed:  # a plain loop: a generator per output (70 a LeNet step) showed in its profile
        if shape[axis] != size:
            return f"{value.dtype}{list(shape)}"
    return None


def walk(block, steps: Sequence[Step], env: dict) -> None:
    """Run ``steps`` over ``env`` (name -> tensor): each output stored, checked against its declared dtype and
    shape; dead vars dropped. A kernel's failure or a wrong output type is an ExecutionError naming the op."""
    for fn, ins, outs, types, dead, ops in steps:
        try:
            result = fn(*[env[n] for n in ins])
        except Exception as e:
            index = ops[0]
            op = block.ops[index]
            given = ", ".join(f"{n}: {getattr(env.get(n), 'dtype', '?')}{list(getattr(env.get(n), 'shape', []))}"
                              for n in ins)
            raise ExecutionError(f"{op_location(block, index, op.type, op.callsite)} failed: {type(e).__name__}: "
                                 f"{e}; inputs: {given}") from e
        values = (result,) if len(outs) == 1 else result
        if len(values) != len(outs):
            index = ops[0]
            op = block.ops[index]
            raise ExecutionError(f"{op_location(block, index, op.type, op.callsite)}: the torch kernel returned "
                                 f"{len(values)} outputs for {len(outs)} output vars")
        for name, value, declared in zip(outs, values, types):
            wrong = _wrong_type(value, declared)
            if wrong is not None:
                at = next(i for i in ops if name in block.ops[i].output_arg_names)
                op = block.ops[at]
                raise ExecutionError(f"{op_location(block, at, op.type, op.callsite)}: output '{name}' is {wrong}, "
                                     f"declared {block.var(name).dtype}{list(block.var(name).shape)} (torch kernel)")
            env[name] = value
        for name in dead:
            env.pop(name, None)
