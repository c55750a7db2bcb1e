"""Block 0 as a list of steps, one per op the run needs, in block order: the kernel built from the op, the input
and output names, the declared type of each output, and the vars that die after the step; and the steps as
generated Python functions (``compile_walk``) that a run calls over an env of torch tensors: nothing leaves torch
between ops."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import torch

from gradgen.program.describe import op_location

from ...errors import ExecutionError
from ..shared.signature import RunSignature, is_persistable
from .joint import pairs
from .kernels import JOINT, KERNELS
from .xp import torch_dtype

Tensor = torch.Tensor

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


def _described(value) -> str:
    """A kernel's value as the error of a wrong output names it (``_type_test`` said it is not the declared type)."""
    if not isinstance(value, torch.Tensor):
        return f"a {type(value).__name__}, not a tensor"
    return f"{value.dtype}{list(value.shape)}"


CHUNK_STEPS = 256
"""Steps per generated function (``compile_walk``): a chunk's source compiles in ~10 ms, and one function per
chunk keeps each ``compile`` small whatever the program's size (the time grows with the steps, never faster)."""


class _Refusal(Exception):
    """Carries a walk's own ExecutionError (a wrong output) past the chunk's handler of kernel failures."""


def _type_test(declared) -> Callable[[Any], bool]:
    """A test true for a tensor of the declared (dtype, rank, fixed dims). No fixed dim or one, the common cases, get
    tests of their own without a generator: 0.40 and 0.70 us a call against 1.01 and 1.34 for the general one (a
    LeNet step checks 66 outputs)."""
    dtype, rank, fixed = declared
    if not fixed:
        return lambda value: isinstance(value, Tensor) and value.dtype is dtype and value.dim() == rank
    if len(fixed) == 1:
        ((axis, size),) = fixed
        return lambda value: (isinstance(value, Tensor) and value.dtype is dtype and value.dim() == rank
                              and value.shape[axis] == size)
    return lambda value: (isinstance(value, Tensor) and value.dtype is dtype and value.dim() == rank
                          and all(value.shape[axis] == size for axis, size in fixed))


class _Chunk:
    """One generated function's source, and what it calls besides the kernels: each step's output checks, and, for
    its one handler of kernel failures, which step each source line runs and the locals holding its inputs."""

    def __init__(self, block, steps: Sequence[Step], tests: dict):
        self.block, self.steps, self.tests = block, steps, tests
        self.line_step: dict[int, int] = {}
        self.inputs: dict[int, tuple[str, ...]] = {}

    def op_of(self, at: int, name: str | None = None) -> tuple[int, Any]:
        """The index and op of step ``at`` (the one writing ``name`` where given: a joint step runs two)."""
        ops = self.steps[at].ops
        index = ops[0] if name is None else next(i for i in ops if name in self.block.ops[i].output_arg_names)
        return index, self.block.ops[index]

    def checked(self, at: int) -> Callable[[Any], Any]:
        """Step ``at``'s output check: its one value, returned as it is when of the declared type."""
        test = self._test(self.steps[at].types[0])

        def check(value):
            if test(value):
                return value
            raise self._wrong(at, 0, value)
        return check

    def counted(self, at: int) -> Callable[[Any], tuple]:
        """Step ``at``'s output check where it has several outputs (or none): its values, returned as they are when
        there is one per output var, each of its declared type."""
        tests = [self._test(declared) for declared in self.steps[at].types]

        def count(result):
            if len(result) != len(tests):
                index, op = self.op_of(at)
                raise _Refusal(ExecutionError(f"{op_location(self.block, index, op.type, op.callsite)}: the torch "
                                              f"kernel returned {len(result)} outputs for {len(tests)} output vars"))
            for which, (value, test) in enumerate(zip(result, tests)):
                if not test(value):
                    raise self._wrong(at, which, value)
            return result
        return count

    def failed(self, error: Exception, line: int, values: Mapping[str, Any]) -> ExecutionError:
        """The kernel of the step on source line ``line`` raised ``error``; ``values`` are the function's locals."""
        at = self.line_step.get(line)
        if at is None:  # (a read of ``env``: the run signature gives every step its inputs, so never so far)
            return ExecutionError(f"the torch walk failed outside its kernels: {type(error).__name__}: {error}")
        index, op = self.op_of(at)
        given = ", ".join(f"{n}: {getattr(v, 'dtype', '?')}{list(getattr(v, 'shape', []))}"
                          for n, v in zip(self.steps[at].ins, (values.get(name) for name in self.inputs[at])))
        return ExecutionError(f"{op_location(self.block, index, op.type, op.callsite)} failed: "
                              f"{type(error).__name__}: {error}; inputs: {given}")

    def _test(self, declared) -> Callable[[Any], bool]:
        found = self.tests.get(declared)
        if found is None:
            found = self.tests[declared] = _type_test(declared)
        return found

    def _wrong(self, at: int, which: int, value) -> _Refusal:
        name = self.steps[at].outs[which]
        index, op = self.op_of(at, name)
        var = self.block.var(name)
        return _Refusal(ExecutionError(f"{op_location(self.block, index, op.type, op.callsite)}: output '{name}' is "
                                       f"{_described(value)}, declared {var.dtype}{list(var.shape)} (torch kernel)"))

    def source(self, first: int, last: int) -> tuple[str, dict[str, Any]]:
        """The function running steps ``first`` to ``last - 1`` over ``env``: each value a local from its first
        use (read from ``env`` if an earlier chunk or the run made it), each kernel's result passed through its
        output check, each dead var deleted (and dropped from ``env``), the values it made that live on written
        back; a kernel's failure found by its line. A line a step and a call per check: ``compile`` takes 11-15
        us a line, more for a test written inline. Returned with the globals it reads (which hold this object, never
        the reverse: no reference cycle)."""
        names: dict[str, Any] = {"chunk": self, "_Refusal": _Refusal}
        local: dict[str, str] = {}
        from_env: set[str] = set()
        produced: set[str] = set()
        fresh = itertools.count()
        lines = ["def walk_chunk(env):", "    try:"]

        def name_of(var: str) -> str:
            if var not in local:
                local[var] = f"v{next(fresh)}"
            return local[var]

        for at in range(first, last):
            step = self.steps[at]
            for var in step.ins:
                if var not in local:
                    lines.append(f"        {name_of(var)} = env[{var!r}]")
                    from_env.add(var)
            self.inputs[at] = tuple(local[var] for var in step.ins)
            names[f"f{at}"] = step.fn
            call = f"f{at}({', '.join(self.inputs[at])})"
            outs = [name_of(var) for var in step.outs]
            names[f"c{at}"] = self.checked(at) if len(outs) == 1 else self.counted(at)
            # (no output at all: the run signature skips such a step, and the line stays valid Python)
            lines.append(f"        {', '.join(outs)}{' = ' if outs else ''}c{at}({call})")
            self.line_step[len(lines)] = at  # (line numbers count from 1)
            produced.update(step.outs)
            if step.dead:
                lines.append(f"        del {', '.join(local.pop(var) for var in step.dead)}")
                lines += [f"        env.pop({var!r}, None)" for var in step.dead if var in from_env]
        lines += [f"        env[{var!r}] = {name}" for var, name in local.items() if var in produced]
        return "\n".join([*lines, "        pass", "    except _Refusal as refusal:",
                          "        raise refusal.args[0] from None", "    except Exception as e:",
                          "        raise chunk.failed(e, e.__traceback__.tb_lineno, locals()) from e"]), names


def compile_walk(block, steps: Sequence[Step]) -> Callable[[dict], None]:
    """``steps`` as generated Python functions over an env of tensors (name -> tensor), in chunks of
    ``CHUNK_STEPS``: each output stored, checked against its declared dtype and shape, dead vars dropped, with
    locals in place of the env's lookups and no loop between the kernels (PyTensor's ``fgraph_to_python``
    generates such a function); var names enter the source only as string literals. Measured on the anchors' seed
    MLP step (17 ops, float32): 750-833 us a run against 898-1004 walked; a 15,005-op program's functions took
    ~0.65 s to make. A kernel's failure or a wrong output type is an ExecutionError naming the op."""
    tests: dict[tuple, Callable[[Any], bool]] = {}
    chunks = []
    for first in range(0, len(steps), CHUNK_STEPS):
        last = min(first + CHUNK_STEPS, len(steps))
        source, names = _Chunk(block, steps, tests).source(first, last)
        exec(compile(source, f"<torch walk of steps {first}-{last - 1}>", "exec"), names)
        chunks.append(names.pop("walk_chunk"))  # (left in its own globals, it would be a reference cycle)
    if len(chunks) == 1:
        return chunks[0]

    def walk_all(env: dict) -> None:
        for chunk in chunks:
            chunk(env)
    return walk_all
