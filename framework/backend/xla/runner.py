"""Runs on the xla backend (``Executor(backend="xla")``): what happens around a compiled step.

The same as around the numpy plan: feeds and scope values checked against their declared types
(``shared/conformance``), the run's names (``shared/signature``), an all-or-nothing commit after a successful
run (``runtime/commit.held_interrupts``), fetched arrays handed out as numpy arrays the caller owns. The step
itself is one pure function per block and run signature (``compile.py``).

A block compiled for one set of shapes meets another (a partial last batch, an eval batch): that run goes to the
numpy reference, and once the reference's runs of those shapes have taken as long as a compile of the block
(``RENT_BEFORE_COMPILE``), XLA compiles them in a background thread (*compile behind*, as TensorFlow's XLA runs a
cluster on its fallback kernels while ``--tf_xla_async_compilation`` compiles it); the first run after the compile
is done is XLA's. Not on a GPU (the reference runs on the host), not for a block that draws from
random streams (its draws stay in the order one engine gives them), not for a data-parallel block (every rank
runs the same engine): those compile in the run, as a first shape always does. ``COMPILE_BEHIND = False`` makes
every shape compile in its run.

Values the step committed stay on the backend between runs: the scope stores the backend's own arrays
(``Scope.update(..., as_is=True)``; a read gives a numpy view), and the next run passes them back in, lending
the memory of the ones it updates to their new values (buffer donation), unless someone stored another array
under that name in the meantime. A run whose old values are lent holds Ctrl-C back from the call to the commit:
once lent, the old values are gone, so the new ones must land.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import nullcontext
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from ...errors import ExecutionError
from ...runtime.commit import held_interrupts
from ...runtime.per_version import PerVersion
from ...runtime.rank_runs import has_collectives
from ...runtime.scope import Scope
from .. import DEFAULT_BACKEND, RunSettings
from .. import runner as backend_runner
from ..shared.conformance import checked_feeds, declared, scope_value
from ..shared.signature import run_signature
from ..shared.background import background_preparation
from ..shared.cores import usable_cpus
from .compile import device_for, own_array, persists_compiles
from .failures import compile_failed, run_failed
from .pieces import compiled_block, declines
from .pool import pool_threads, size_pool
from .refused import problems

__all__ = ["COMPILE_BEHIND", "RENT_BEFORE_COMPILE", "RENT_KEPT", "XlaRunner", "make_runner"]

NAME = "xla"

COMPILE_BEHIND = True
"""Whether a block's later shapes compile in a background thread while their runs go to the numpy reference
(the module docstring). Measured on ``tests/bench/partial_batch.py`` (a digits CNN, 60 epochs, a batch of 5 at
each epoch's end): the batch-5 compile, 0.5-0.7 s in the run, was the whole of the xla engine's 1.25-1.36x over
the run with equal batches."""

RENT_BEFORE_COMPILE = 1.0
"""A shape new to a compiled block compiles behind once the reference's runs of it have taken this many times the
block's mean compile of one set of shapes so far (``compile_seconds_per_shape``: every piece of a block in
pieces): rent, then buy, which costs at most about twice what the better choice would have
had the number of runs been known (the rule ``compile.UPGRADE_AFTER`` follows). A shape met once an epoch (a
partial last batch) may then never compile: on ``tests/bench/partial_batch.py``, 60 epochs, the batch-5 compile
behind took 0.87 s beside the runs, and its reference runs 3 ms each; 0 compiles each new shape at once."""

RENT_KEPT = 256
"""New shapes whose rent a compiled block keeps (the last met); an older one starts again from nothing."""


def make_runner(settings: Callable[[], RunSettings]) -> "XlaRunner":
    """The xla backend's runner (``backend.runner``). It checks types while it compiles and has no per-op
    checks, so an executor that asks for those is refused; ``threads`` sizes XLA's CPU pool (``pool.py``)."""
    given = settings()
    if given.check_nan_inf or given.check_types or given.options is not None:
        raise ExecutionError(f"check_nan_inf, check_types and options are numpy-backend settings; backend "
                             f"'{NAME}' checks types while it compiles and has no per-op checks")
    size_pool(given.threads)
    return XlaRunner(given.place, partial(backend_runner, DEFAULT_BACKEND, settings) if given.compile_behind else None,
                     given.profiler)


def _deleted(value: Any) -> bool:
    """Whether ``value`` is a backend array whose memory a failed call took (jax: ``is_deleted()``)."""
    return own_array(value) and value.is_deleted()


class _Entry:
    """One block compiled for one run signature, with its names' declared types."""

    def __init__(self, compiled, block, names: Sequence[str]):
        self.compiled = compiled
        self.declared = {n: declared(block.var(n)) for n in names}
        self.told = (0, 0.0)
        """(compiles, their seconds) told to a run's ``built`` so far (``tell_compiles``)."""
        self.behind: threading.Thread | None = None
        """The background compile of shapes new to this block (*compile behind*), while it runs."""
        self.behind_failed = False
        """Whether one failed: every later shape then compiles in its run, where its error is raised."""
        self.collective = has_collectives(block)
        """A data-parallel block: every rank must run it on the same engine."""
        self._pending: tuple[list, list] | None = None
        self.rent: OrderedDict[tuple, float] = OrderedDict()
        """Seconds the reference has run each new shape (its shapes and dtypes) while it waits to compile, for the
        ``RENT_KEPT`` shapes met last (a job whose every batch has a shape of its own keeps no more)."""

    def tell_compiles(self, built: Callable[[float], None]) -> None:
        """Tell ``built`` of each compile since the last time (a background one too), once; two or more that
        finished since share their time equally."""
        compiles, seconds = self.compiled.compiles, self.compiled.compile_seconds
        new = compiles - self.told[0]
        for _ in range(new):
            built((seconds - self.told[1]) / new)
        self.told = (compiles, seconds)

    def may_compile_behind(self, device) -> bool:
        """Whether a run of shapes new to this block may go to the reference while they compile."""
        compiled = self.compiled
        return (COMPILE_BEHIND and device is None and compiled.compiles > 0 and not self.behind_failed
                and not compiled.draws_at_random and not self.collective)

    def shapes_behind(self, feed_values: Sequence[Any], scope_values: Sequence[Any]) -> None:
        """Note the shapes and dtypes of a run's values, for ``compile_behind`` after it."""
        self._pending = ([_abstract(v) for v in feed_values], [_abstract(v) for v in scope_values])

    def rented(self, seconds: float) -> None:
        """The reference ran the shapes ``shapes_behind`` noted in ``seconds``: compile them behind once their
        runs have cost a compile (``RENT_BEFORE_COMPILE``)."""
        if self._pending is None:
            return
        key = tuple((s.shape, s.dtype) for part in self._pending for s in part)
        self.rent[key] = self.rent.pop(key, 0.0) + seconds
        if len(self.rent) > RENT_KEPT:
            self.rent.popitem(last=False)
        if self.rent[key] >= RENT_BEFORE_COMPILE * self.compiled.compile_seconds_per_shape:
            self.compile_behind()
        self._pending = None

    def compile_behind(self) -> None:
        """Compile the executable of the shapes ``shapes_behind`` noted in a background thread, unless one is
        compiling already (the next run of shapes still new starts the next)."""
        if self._pending is None or (self.behind is not None and self.behind.is_alive()):
            return
        (feeds, held), self._pending = self._pending, None

        def work() -> None:
            try:
                with background_preparation():
                    self.compiled.executable(feeds, held)
            except Exception:  # noqa: BLE001 - the next run of these shapes compiles in place and raises it there
                self.behind_failed = True

        # Not a daemon: a daemon thread killed inside XLA's C++ compiler aborts the process.
        self.behind = threading.Thread(target=work, name="gradgen-xla-compile-behind", daemon=False)
        self.behind.start()


def _abstract(value) -> Any:
    """What a compile reads of ``value``: its shape and dtype."""
    return jax.ShapeDtypeStruct(tuple(np.shape(value)), np.dtype(value.dtype))


class XlaRunner:
    """One executor's runs on xla: compiled blocks cached per program version, feed and fetch names."""

    name = NAME

    def __init__(self, place, reference: Callable[[], Any] | None = None, profiler: Any = None):
        self.device = device_for(place)
        self._compiled = PerVersion()
        self._make_reference, self._reference = reference, None
        """Makes the numpy runner that runs shapes compiling behind (none: every shape compiles in its run)."""
        self._making_reference: threading.Thread | None = None
        self._profiler = profiler if self.device is None else None
        """The executor's profiler, told of XLA's CPU pool each run (on the CPU: a GPU's runs have no such count)."""

    def _warm_reference(self) -> None:
        """Make the reference runner in a background thread, once: its import (0.25 s) overlaps the first
        compile, whose XLA part leaves the interpreter lock free, instead of delaying the first run that needs it
        (the partial batch of ``tests/bench/partial_batch.py``: 0.43 -> 0.2 s)."""
        def make() -> None:
            try:
                with background_preparation():
                    self._reference = self._make_reference()
            except Exception:  # noqa: BLE001 - made again where it is needed, and its error raised there
                pass

        self._making_reference = threading.Thread(target=make, name="gradgen-xla-reference", daemon=False)
        self._making_reference.start()

    def _reference_runner(self):
        """The reference runner (made now if its background making failed)."""
        self._making_reference.join()
        if self._reference is None:
            self._reference = self._make_reference()
        return self._reference

    @staticmethod
    def problems(block) -> list[str]:
        """The ops of ``block`` xla cannot run (``table.problems``)."""
        return problems(block)

    @staticmethod
    def declines(program) -> str | None:
        """Why ``backend="auto"`` should not start compiling ``program`` (``pieces.declines``), or None."""
        return declines(program)

    def compiled_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str]) -> _Entry:
        """The cached compiled block of ``program``'s block 0 for these names; refused whole, naming every op the
        backend cannot run, before anything runs."""
        per_program = self._compiled.entries(program)
        key = (tuple(sorted(feed_names)), tuple(fetch_names))
        entry = per_program.get(key)
        if entry is None:
            block = program.global_block()
            sig = run_signature(block, key[0], key[1])
            found = problems(block)
            if found:
                raise ExecutionError(f"the {self.name} backend cannot run this program ({len(found)} op"
                                     f"{'s' if len(found) > 1 else ''}):\n  " + "\n  ".join(found))
            compiled = compiled_block(block, sig.feeds, sig.from_scope, sig.fetches, sig.commits,
                                      self.device, sig.skipped)
            entry = _Entry(compiled, block, (*feed_names, *sig.from_scope))
            per_program[key] = entry
        return entry

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run: the fetched arrays (numpy's, whatever ``return_numpy`` says: the caller's own copies); the
        scope gets the committed values only if the whole run succeeds. ``built(seconds)`` is told of every
        compile (``mark``: the profile's phases; ``agreed()`` raises before the commit when the other ranks of a
        data-parallel run were fed other shapes)."""
        if self._make_reference is not None and self._making_reference is None:
            self._warm_reference()
        with scope.run_lock:
            fetched = self._run_locked(program, feed, fetch_names, scope, mark, built, agreed)
        if fetched is not None and self._profiler is not None:
            self._profiler.ran_threads(program, pool_threads() or usable_cpus())
        if fetched is None:  # new shapes: this run is the reference's, then they may compile behind
            reference = self._reference_runner()
            start = time.perf_counter()
            try:
                return reference.run(program, feed, fetch_names, scope, return_numpy, mark, built, agreed)
            finally:  # (started after the run: its trace would hold the interpreter lock the run needs)
                self.compiled_for(program, list(feed), fetch_names).rented(time.perf_counter() - start)
        try:
            out = [np.array(value) for value in fetched]  # the caller's own arrays, not views of the backend's
        except Exception as e:  # an asynchronous failure of the run, met when its result is read
            raise ExecutionError(f"block 0: reading the fetched values of the xla run failed: {type(e).__name__}: "
                                 f"{e} (the run's updates were committed)") from e
        mark("fetch")
        return out

    def _run_locked(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope,
                    mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]
                    ) -> list | None:
        """The run, under the scope's run lock; None, having touched nothing, when its shapes compile behind."""
        entry = self.compiled_for(program, list(feed), fetch_names)
        compiled, block = entry.compiled, program.global_block()
        scope_values = [self._scope_value(block, scope, name, entry.declared[name]) for name in compiled.from_scope]
        # A feed already of this backend's arrays goes in as it is (no copy to host memory and back), unless the
        # run also reads it from the scope and may lend its memory.
        checked = checked_feeds(block, feed, entry.declared, own=lambda value: own_array(value) and
                                not value.is_deleted() and not any(value is held for held in scope_values))
        feed_values = [checked[name] for name in compiled.feeds]
        mark("feeds")
        try:  # compiled here if these shapes are new (the plan phase), unless they may compile behind
            executable = compiled.executable(feed_values, scope_values, compile_new=False)
            if executable is None:  # (asked only of new shapes: nothing more on a run's usual path)
                if self._make_reference is not None and entry.may_compile_behind(self.device):
                    entry.shapes_behind(feed_values, scope_values)
                    return None
                executable = compiled.executable(feed_values, scope_values)
        except Exception as e:  # jax's or XLA's own error: raised as gradgen's
            raise compile_failed(block, e) from e
        finally:
            entry.tell_compiles(built)
        mark("plan")
        with held_interrupts() if executable.donates else nullcontext():
            try:
                fetched, committed = compiled(feed_values, scope_values, executable)
            except Exception as e:
                lost = [n for n, v in zip(compiled.from_scope, scope_values) if _deleted(v)]
                raise run_failed(block, e, executable.ctx.sizes, (*compiled.feeds, *compiled.from_scope),
                                 (*feed_values, *scope_values), lost) from e
            finally:
                entry.tell_compiles(built)  # a loop that outgrew its History rows compiles again in the call
            mark("loop")
            new = {name: value for name, value in zip(compiled.commits, committed) if name not in feed}
            agreed()  # a data-parallel run: every rank was fed the same shapes (else nothing is committed)
            with held_interrupts():  # (already held when the old values were lent: then this costs nothing)
                scope.update(new, as_is=True)  # a fed persistable is the feed's for this run only: not committed
        mark("commit")
        return fetched

    def prepare(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope) -> float:
        """Compile the step for these names and the shapes and dtypes of these feeds and of the scope's values,
        without running it: ``backend="auto"`` calls it from a background thread while the numpy backend runs.
        Only shapes and dtypes are read (the scope's arrays may be lent to a run meanwhile). Returns the seconds
        spent in compiles a persistent cache keeps for later processes (``compile.persists_compiles``), which a
        later process's preparation skips."""
        entry = self.compiled_for(program, list(feed), fetch_names)
        compiled, block = entry.compiled, program.global_block()
        checked = checked_feeds(block, feed, entry.declared)
        scope_values = []
        for name in compiled.from_scope:
            value = scope.own(name)
            if value is None or not hasattr(value, "dtype"):
                value = scope_value(block, scope, name, entry.declared[name])
            scope_values.append(_abstract(value))
        before = compiled.compile_seconds
        compiled.executable([_abstract(checked[name]) for name in compiled.feeds], scope_values)
        return compiled.compile_seconds - before if persists_compiles() else 0.0

    @staticmethod
    def _scope_value(block, scope: Scope, name: str, want) -> Any:
        """The value a run reads: the backend's own array when this scope holds one (the run may lend its memory),
        else the numpy array, checked against the declared type (a parent scope's backend array is read as
        numpy: the run must not lend what another scope holds)."""
        own = scope.own(name)
        if own is not None and type(own) is not np.ndarray:
            return own
        return scope_value(block, scope, name, want)
