"""What a compiled plan is made of: the options it was built with, its units and steps, the plan itself.

Plain data, so that the builder (``plan``), the run loop (``run``) and the
tools that read plans (``tools.memory``) share it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from .buffers import Buffers
from .checks import OutputCheck
from ...runtime.conformance import Declared
from .kernels import KERNELS, KernelFactory

__all__ = ["PlanOptions", "Unit", "Step", "Plan", "TYPICAL_BATCH", "static_size"]


@dataclass(frozen=True, eq=False)
class PlanOptions:
    """How to compile a block. The defaults are what ``Executor`` runs; tests and tools switch parts off.

    >>> Executor(options=PlanOptions(fuse=False))  # doctest: +SKIP

    Options compare (and key plan caches) by identity: the kernel table is a dict.
    """

    schedule: bool = True
    """Run each optimizer update as early as its data allows (``schedule``), so gradients die sooner."""
    buffers: bool = True
    """Give outputs of kernels that take ``out`` plan-owned buffers, and double-buffer in-place updates."""
    fuse: bool = True
    """Fuse: a weight-gradient product into the SGD update after it (``fusion``), and regions (below). False turns
    every fusion off."""
    regions: bool = True
    """With ``fuse``: run each stretch of small ops between the big products (elementwise ops, small products,
    the loss and its gradient, small updates) as one generated numba function (``fuse_region``; needs numba).
    Not in a checking plan (``checks``), which checks every op's outputs and so runs them one by one."""
    warm_runs: int = 2
    """How many runs execute a region op by op (timed) before its kernel is asked of the compile
    worker (``compile_queue``): a program run once or twice, like most tests and tools, never starts numba."""
    background_compile: bool = True
    """Compile regions and fused loops on the compile worker thread while their ops run one by one
    (``compile_queue``), so no run waits for numba. False: the run that asks waits for the compile (tests that
    assert on compiled code; ``compile_queue.wait_for_compiles()`` is the other way)."""
    read_back: bool = True
    """A gradient loop reads the values of its forward loop's body back, kept by the forward loop one per
    iteration, instead of recomputing them (``runtime/loop_read_back``, ``kernels/control_flow``). False: it
    recomputes them, as its program says (less memory: nothing kept beyond History)."""
    checks: tuple[OutputCheck, ...] = ()
    """Checks run on every step's outputs (``checks``); sub-plans run them too."""
    kernels: Mapping[str, KernelFactory] = field(default_factory=lambda: KERNELS, repr=False)
    """op type -> kernel factory: a test can swap in a kernel that misbehaves, without patching the table."""
    profile: Any = None
    """A ``profile.Profiler`` to time every step into (``Executor(profile=True)`` sets it); None: steps untimed,
    so an ordinary plan's run loop calls the kernels themselves."""


class Unit(NamedTuple):
    """One step-to-be, before kernels and buffers: the ops it runs and the names it reads and writes."""

    index: int
    """The op whose place the unit takes, and which errors name (a fused unit: the last op it runs)."""
    ops: tuple[int, ...]
    """Indexes of the ops the unit runs, in order: one op, or a fused group."""
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    kernel: Callable[..., Any] | None = None
    """A fused unit's own kernel function; None: the op's kernel, built from ``PlanOptions.kernels``."""


class Step(NamedTuple):
    """What the run loop needs for one unit. The loop unpacks each step in one go (reading six fields as
    attributes would cost more than a tiny op), so the field order is part of ``run.run_plan``."""

    fn: Callable[..., Any]
    take: Any
    """How to read the inputs from the env: the one input's name when ``nargs`` is 1 (a dict lookup is the
    cheapest read), an ``itemgetter`` returning them as a tuple when more, None when none."""
    nargs: int
    out: str | None
    """The output's name when there is exactly one, else None (and ``outs`` names them)."""
    outs: tuple[str, ...]
    dead: tuple[str, ...]
    """The vars to drop from the env right after the step."""
    ins: tuple[str, ...]
    index: int
    """The op's index in its block (steps run in ``schedule`` order, not always block order)."""
    ops: tuple[int, ...]
    """Every op the step runs (more than ``index`` for a fused step)."""


class Plan(NamedTuple):
    """A compiled block. ``steps`` run in ``schedule`` order; ``steps[i].index`` is the op's index in the block."""

    block: Any
    steps: tuple[Step, ...]
    feeds: tuple[str, ...]
    """Feed names the run keeps (fed vars no op reads and nobody fetches are dropped)."""
    from_scope: tuple[str, ...]
    """Persistable vars read before any op writes them: loaded from the scope at run start."""
    commits: tuple[str, ...]
    """Persistable vars some op writes: copied into the scope only when the whole run succeeded."""
    fetches: tuple[str, ...]
    buffers: Buffers
    """Arrays the plan owns and reuses across runs (intermediates' slots, spare parameter buffers)."""
    declared: dict[str, Declared]
    """The declared types of the feeds and scope values a run checks on the way in."""
    options: PlanOptions
    subplans: dict[int, dict[str, "Plan"]]
    """op index -> the compiled sub-blocks its kernel runs, by key (control-flow ops)."""
    head: tuple[Step, ...] = ()
    """The steps before the tail that may update parameters in place (all of ``steps`` when there is none)."""
    in_place: tuple[Callable[..., Any], ...] = ()
    """One writer per tail step (``fusion.sgd_gemm_writer``): the last ``len(in_place)`` steps may write their
    parameter onto the scope's own array inside the commit (``in_place``)."""


TYPICAL_BATCH = 64
"""What a -1 dim is taken to be when a plan weighs vars by their declared sizes (regions, the in-place tail)."""


def static_size(shape: tuple) -> int:
    """Elements of a var of declared ``shape``, a -1 dim counted as ``TYPICAL_BATCH``."""
    size = 1
    for d in shape:
        size *= TYPICAL_BATCH if d == -1 else d
    return size
