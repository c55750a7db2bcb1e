"""What a compiled plan is made of: the options it was built with, its steps, the plan itself.

Plain data, so that the builder (``plan``), the run loop (``run``) and the
tools that read plans (``tools.memory``) share it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from .checks import OutputCheck
from ..shared.conformance import Declared
from .kernels import KERNELS, KernelFactory

__all__ = ["PlanOptions", "Step", "Plan"]


@dataclass(frozen=True, eq=False)
class PlanOptions:
    """How to compile a block. The defaults are what ``Executor`` runs; tests and tools change them.

    >>> Executor(options=PlanOptions(read_back=False))  # doctest: +SKIP

    Options compare (and key plan caches) by identity: the kernel table is a dict.
    """

    read_back: bool = True
    """A gradient loop reads the values of its forward loop's body back, kept by the forward loop one per
    iteration, instead of recomputing them (``shared/loop_read_back``, ``kernels/control_flow``). False: it
    recomputes them, as its program says (less memory: nothing kept beyond History)."""
    checks: tuple[OutputCheck, ...] = ()
    """Checks run on every step's outputs (``checks``); sub-plans run them too."""
    kernels: Mapping[str, KernelFactory] = field(default_factory=lambda: KERNELS, repr=False)
    """op type -> kernel factory: a test can swap in a kernel that misbehaves, without patching the table."""
    profile: Any = None
    """A ``profile.Profiler`` to time every step into (``Executor(profile=True)`` sets it); None: steps untimed,
    so an ordinary plan's run loop calls the kernels themselves."""


class Step(NamedTuple):
    """What the run loop needs for one op. The loop unpacks each step in one go (reading the fields as
    attributes would cost more than a tiny op), so the field order is part of ``run.run_steps``."""

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
    """The op's index in its block: steps run in block order, one per op."""


class Plan(NamedTuple):
    """A compiled block: one step per op, in block order (``steps[i].index`` is the op's index)."""

    block: Any
    steps: tuple[Step, ...]
    feeds: tuple[str, ...]
    """Feed names the run keeps (fed vars no op reads and nobody fetches are dropped)."""
    from_scope: tuple[str, ...]
    """Persistable vars read before any op writes them: loaded from the scope at run start."""
    commits: tuple[str, ...]
    """Persistable vars some op writes: copied into the scope only when the whole run succeeded."""
    fetches: tuple[str, ...]
    declared: dict[str, Declared]
    """The declared types of the feeds and scope values a run checks on the way in."""
    options: PlanOptions
    subplans: dict[int, dict[str, "Plan"]]
    """op index -> the compiled sub-blocks its kernel runs, by key (control-flow ops)."""
