"""Block 0 as a list of steps, one per op the run needs, in block order: the kernel built from the op, the input
and output names, the declared type of each output, and the vars that die after the step; and the steps as
generated Python functions (``compile_walk``) that a run calls over an env of torch tensors: nothing leaves torch
between ops."""
from __future__ import annotations

import itertools
from typing import Any, Callable, NamedTuple, Sequence

import torch

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.signature import RunSignature, is_persistable
from .joint import pairs
from .kernels import JOINT, KERNELS
from .xp import torch_dtype

__all__ = ["CHUNK_STEPS", "Step", "Timer", "build_steps", "compile_walk"]


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
    for axis, size in fixed:
        if shape[axis] != size:
            return f"{value.dtype}{list(shape)}"
    return None


CHUNK_STEPS = 256
"""Steps per generated function (``compile_walk``): a chunk's source compiles in about a millisecond, so a program
of thousands of ops is not held up by one long compile before its first run."""


class _Failures:
    """The walk's error messages, raised from the generated code by step number (``compile_walk``)."""

    def __init__(self, block, steps: Sequence[Step]):
        self.block, self.steps = block, steps

    def failed(self, at: int, error: Exception, values: Sequence[Any]) -> ExecutionError:
        """Step ``at``'s kernel raised ``error`` on ``values`` (its inputs)."""
        step = self.steps[at]
        op = self.block.ops[step.ops[0]]
        given = ", ".join(f"{n}: {getattr(v, 'dtype', '?')}{list(getattr(v, 'shape', []))}"
                          for n, v in zip(step.ins, values))
        return ExecutionError(f"{op_location(self.block, step.ops[0], op.type, op.callsite)} failed: "
                              f"{type(error).__name__}: {error}; inputs: {given}")

    def counted(self, at: int, result) -> ExecutionError | None:
        """Step ``at``'s kernel returned ``result``: the error where it is not one value per output var."""
        step = self.steps[at]
        if len(result) == len(step.outs):
            return None
        op = self.block.ops[step.ops[0]]
        return ExecutionError(f"{op_location(self.block, step.ops[0], op.type, op.callsite)}: the torch kernel "
                              f"returned {len(result)} outputs for {len(step.outs)} output vars")

    def wrong(self, at: int, which: int, value) -> ExecutionError:
        """Output ``which`` of step ``at`` is not of its declared type."""
        step = self.steps[at]
        name = step.outs[which]
        found = _wrong_type(value, step.types[which])
        index = next(i for i in step.ops if name in self.block.ops[i].output_arg_names)
        op, var = self.block.ops[index], self.block.var(name)
        return ExecutionError(f"{op_location(self.block, index, op.type, op.callsite)}: output '{name}' is {found}, "
                              f"declared {var.dtype}{list(var.shape)} (torch kernel)")


def _type_test(local: str, declared, dtype_name: str) -> str:
    """Python source true when the tensor in ``local`` is of the declared (dtype, rank, fixed dims), the dtype
    being the generated code's global ``dtype_name``."""
    _, rank, fixed = declared
    tests = [f"isinstance({local}, Tensor)", f"{local}.dtype is {dtype_name}", f"{local}.dim() == {int(rank)}"]
    tests += [f"{local}.shape[{int(axis)}] == {int(size)}" for axis, size in fixed]  # (ints: nothing else is spliced)
    return " and ".join(tests)


def _chunk_source(steps: Sequence[Step], first: int, last: int) -> str:
    """The source of one generated function running steps ``first`` to ``last - 1`` over ``env``: each value a
    local from its first use (read from ``env`` if an earlier chunk or the run made it), each kernel called in
    its own ``try`` (free in CPython 3.11 until something raises), each output's type tested inline, each dead
    var deleted (and dropped from ``env``), and the values it made that live on written back."""
    local: dict[str, str] = {}
    from_env: set[str] = set()
    produced: set[str] = set()
    lines = ["def walk_chunk(env):"]

    fresh = itertools.count()

    def name_of(var: str) -> str:
        if var not in local:
            local[var] = f"v{next(fresh)}"
        return local[var]

    for at in range(first, last):
        step = steps[at]
        for var in step.ins:
            if var not in local:
                lines.append(f"    {name_of(var)} = env[{var!r}]")
                from_env.add(var)
        args = ", ".join(local[var] for var in step.ins)
        outs = [name_of(var) for var in step.outs]
        target = outs[0] if len(outs) == 1 else "result"
        lines += ["    try:", f"        {target} = f{at}({args})", "    except Exception as e:",
                  f"        raise failures.failed({at}, e, ({args}{',' if step.ins else ''})) from e"]
        if len(outs) > 1:
            lines += [f"    error = failures.counted({at}, result)", "    if error is not None:",
                      "        raise error", f"    {', '.join(outs)} = result"]
        for which, (out, declared) in enumerate(zip(outs, step.types)):
            lines += [f"    if not ({_type_test(out, declared, f'd{at}_{which}')}):",
                      f"        raise failures.wrong({at}, {which}, {out})"]
        produced.update(step.outs)
        for var in step.dead:
            lines.append(f"    del {local.pop(var)}")
            if var in from_env:
                lines.append(f"    env.pop({var!r}, None)")
    written = [var for var in local if var in produced]
    lines += [f"    env[{var!r}] = {local[var]}" for var in written]
    return "\n".join(lines)


def compile_walk(block, steps: Sequence[Step]) -> Callable[[dict], None]:
    """``steps`` as generated Python functions over an env of tensors (name -> tensor), in chunks of
    ``CHUNK_STEPS``: each output stored, checked against its declared dtype and shape, dead vars dropped, with
    locals in place of the env's lookups and no loop between the kernels (PyTensor's
    ``fgraph_to_python`` generates such a function). Measured on the anchors' seed MLP step (17 ops, float32):
    750-833 us a run against 898-1004 walked. A kernel's failure or a wrong output type is an ExecutionError
    naming the op."""
    failures = _Failures(block, steps)
    chunks = []
    for first in range(0, len(steps), CHUNK_STEPS):
        last = min(first + CHUNK_STEPS, len(steps))
        namespace = {"Tensor": torch.Tensor, "failures": failures}
        for at in range(first, last):
            namespace[f"f{at}"] = steps[at].fn
            namespace.update((f"d{at}_{which}", declared[0]) for which, declared in enumerate(steps[at].types))
        exec(compile(_chunk_source(steps, first, last), f"<torch walk of steps {first}-{last - 1}>", "exec"),
             namespace)
        chunks.append(namespace.pop("walk_chunk"))  # (left in its own globals, it would be a reference cycle)
    if len(chunks) == 1:
        return chunks[0]

    def walk_all(env: dict) -> None:
        for chunk in chunks:
            chunk(env)
    return walk_all

