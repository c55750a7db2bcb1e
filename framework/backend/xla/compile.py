"""One block compiled to XLA for one signature (feeds, scope values, fetches, commits): a pure step function
``(feed values, scope values) -> (fetched values, committed values)``, traced once per distinct set of
run-time shapes and dtypes and compiled ahead of time, so a -1 dim costs one compile per shape it takes, never
one per run (``compiles`` counts them, the profile shows them).

The step also returns one status vector: whether a loop outgrew its History rows, the flags of the run-time
checks its lowerings stated (``context.TraceContext.check``) and the rows of fetched Histories, read back in one
transfer (each read is a wait for the device; two reads cost the RNN step 1.5% more). The caller raises a failed
check before committing anything, and re-runs with more rows after an overflow (the step is pure, so a re-run
is exact).
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...errors import ExecutionError
from ..shared.cache_root import cache_root
from ..shared.creation import random_draw
from ..shared.background import background_preparation
from .context import TraceContext
from .lowerings.control_flow import ALWAYS_STATED
from .trace import trace_block

__all__ = ["CompiledBlock", "INITIAL_HISTORY_ROWS", "MAX_EXECUTABLES", "QUICK_COMPILE", "UPGRADE_AFTER", "cache_dir",
           "device_for", "own_array", "persists_compiles", "x64"]

INITIAL_HISTORY_ROWS = 64
"""History rows a loop without ``max_iterations`` starts with; a longer loop makes the step re-run with four
times as many (up to ``max_iterations`` when it has one)."""

HOST_COMPUTED = ("uniform_random", "gaussian_random")
"""Op types whose block-0 outputs are drawn on the host (``shared/creation.random_draw``, as the numpy kernels draw
them) and passed in, not embedded: a seeded draw is the same array every run (the numpy backend's, bit for bit),
and a startup program's weights as constants in the compiled program made it hundreds of MiB and took seconds to
compile."""

_NO_STATUS = np.zeros(0, np.int64)
"""The status of a step with nothing to report (``_status``: no check, no History)."""

MAX_EXECUTABLES = 32
"""Executables kept per compiled block (one per distinct run-time shapes), least recently used dropped."""

QUICK_COMPILE = {"xla_backend_optimization_level": 0}
"""XLA's options for a block's later shapes (a partial last batch, another eval batch): LLVM's cheapest
optimization level. On the digits CNN of ``tests/bench/partial_batch.py`` the batch-5 step compiled in 0.38 s
instead of 0.67 and ran as fast (0.83 ms against 0.79); a batch-64 step ran 2.3x slower (3.4 ms against 1.5), so
a quick executable is compiled again with the default options, in a background thread, once its runs have taken
longer than its compile (``_Executable.quick``): a shape met once an epoch never pays the slow compile, one met
every run soon has it."""

UPGRADE_AFTER = 1.0
"""How long a quick executable's calls run, as a multiple of its compile's time, before it is compiled with the
default options: 1 pays at most twice what the better of the two would have cost, had the run count been known."""

_cache_lock = threading.Lock()
_cache_ready = False


def x64():
    """The context every trace and call runs in: float64 and int64 stay what they are (jax's default would
    silently make them float32 and int32)."""
    return jax.enable_x64(True)


def cache_dir() -> str:
    """Where compiled executables persist between processes: ``$GRADGEN_CACHE_DIR/xla`` (default
    ``~/.cache/gradgen/xla``), owner-only, since whoever can write it can run code in this process."""
    return os.path.join(cache_root(), "xla")


def _use_persistent_cache() -> None:
    """Point jax's persistent compilation cache at ``cache_dir()`` once, unless the user set one already."""
    global _cache_ready
    with _cache_lock:
        if _cache_ready:
            return
        _cache_ready = True
        if jax.config.jax_compilation_cache_dir:
            return
        path = cache_dir()
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return  # no cache: every process compiles
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def persists_compiles() -> bool:
    """Whether compiles are kept between processes: jax's persistent compilation cache has a folder (``cache_dir()``,
    or the user's own)."""
    return bool(jax.config.jax_compilation_cache_dir)


def own_array(value: Any) -> bool:
    """True for an array of this backend (a jax array): a run takes it as it is, without a round trip through
    host memory (``runner``)."""
    return isinstance(value, jax.Array)


def device_for(place) -> Any:
    """The jax device of an executor's place: None for the CPU (jax's default device), GPU N for CUDAPlace(N),
    or an ExecutionError saying what jax sees and what to install."""
    from ...runtime.place import CUDAPlace

    if not isinstance(place, CUDAPlace):
        return None
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if place.device_id >= len(gpus):
        seen = ", ".join(str(d) for d in jax.devices())
        raise ExecutionError(f"{place!r}: jax sees {len(gpus)} GPU(s) (its devices: {seen}); a GPU needs jax's GPU "
                             "build, e.g. pip install 'jax[cuda12]' (design_docs/backends.md, 'GPU')")
    return gpus[place.device_id]


def _status(ctx: TraceContext, fetches: Sequence[str]):
    """The run's checks as ONE int64 vector, so the host reads them back in one transfer after the call (each
    transfer is a wait and a copy): ``[overflow, *check passed, *rows of each fetched History]``; None when
    there is nothing to report."""
    overflow = [jnp.any(jnp.stack([jnp.any(o) for o in ctx.overflow]))] if ctx.overflow else []
    passed = [jnp.all(f) for f in ctx.flags]
    steps = [ctx.steps_of[n] for n in fetches if n in ctx.steps_of]
    parts = [jnp.asarray(v, jnp.int64).reshape(1) for v in (*overflow, *passed, *steps)]
    return jnp.concatenate(parts) if parts else None


def _waited(values, since: float) -> float:
    """Seconds from ``since`` until ``values`` (a call's outputs, computed asynchronously) are ready."""
    jax.block_until_ready(values)
    return time.perf_counter() - since


class _Executable:
    """One compiled shape signature: the XLA executable and what its trace found out."""

    def __init__(self, compiled, ctx: TraceContext, history_of: dict[str, int], seconds: float, text: str | None,
                 donates: bool):
        self.compiled, self.ctx, self.history_of, self.seconds, self.text = compiled, ctx, history_of, seconds, text
        self.donates = donates
        """Whether the call reuses the memory of the scope values it updates (their arrays are dead after it)."""
        self.quick: Any = None
        """The lowered step of an executable compiled with ``QUICK_COMPILE`` (compiled again with the default
        options in a background thread once its runs outlast its compile: ``CompiledBlock._run_quick``), else
        None."""
        self.run_seconds = 0.0
        """Time its calls have taken, counted while it is quick."""
        self.upgrade: list = []
        """The background compile's result, (executable, seconds), once it is done: the next call swaps it in
        (in the calling thread, so a call never sees the swap half done)."""
        self.upgrading = False
        """Whether that background compile has been started (once per quick executable)."""
        self.proven = False
        """Whether a call has succeeded: until then the call lends copies of the scope values, so a call that
        fails (an allocation XLA cannot make) leaves the scope's own arrays alive."""


class CompiledBlock:
    """``block`` compiled for one run signature; call it with the run's arrays."""

    def __init__(self, block, feeds: Sequence[str], from_scope: Sequence[str], fetches: Sequence[str],
                 commits: Sequence[str], device=None, skipped: frozenset[int] = frozenset()):
        _use_persistent_cache()
        self.block, self.device = block, device
        self.feeds, self.from_scope = tuple(feeds), tuple(from_scope)
        self.fetches, self.commits = tuple(fetches), tuple(commits)
        self.compiles = 0
        self.compile_seconds = 0.0
        self._executables: "OrderedDict[tuple, _Executable]" = OrderedDict()
        self._rows = INITIAL_HISTORY_ROWS
        self._host_state: dict = {}  # kept across traces (``TraceContext.host_state``)
        self._skipped = frozenset(skipped)
        """Ops the run leaves out (``shared/signature.unneeded_ops``): not traced."""
        self._host_ops = {i: op for i, op in enumerate(block.ops) if op.type in HOST_COMPUTED and i not in skipped}
        self._host_names = [n for op in self._host_ops.values() for n in op.output_arg_names]
        self._host_draws = [random_draw(op) for op in self._host_ops.values()]
        """Made once: a ``redraw`` op's draw holds its stream, a new sample each run, as on the numpy backend."""
        committed = set(self.commits)
        self._donatable = tuple(name in committed for name in self.from_scope)
        """Per scope value: does the run write a new value of it (so its old array may lend its memory)?"""
        self._checks: bool | None = True if any(op.type in ALWAYS_STATED for i, op in enumerate(block.ops)
                                                if i not in skipped) else None
        """Whether the last trace stated run-time checks (a step that may fail keeps the old values, so it donates
        nothing): a later shape then lowers once, without donation, where the first lowered twice; known before
        the first trace where the block holds an op whose lowering always states one (``ALWAYS_STATED``)."""
        self._lock = threading.Lock()
        """Held while the executables are looked up or stored (not while one compiles): a later shape may compile
        in a background thread while runs call the others (``runner``, *compile behind*)."""

    @property
    def draws_at_random(self) -> bool:
        """Whether a run draws from a random stream this block keeps (a seeded draw, dropout): such a block's runs
        all stay on it, so that the streams advance as on the numpy backend."""
        return bool(self._host_ops or self._host_state)

    # -- tracing ---------------------------------------------------------------------------------------------
    def _step(self, rows: int, found: list):
        block, feeds, from_scope = self.block, self.feeds, self.from_scope
        outs = list(self.fetches) + list(self.commits)

        def step(feed_values, donated_values, kept_values, host_values):
            ctx = TraceContext(history_capacity=rows, host_state=self._host_state,
                               precomputed=frozenset(self._host_ops) | self._skipped)
            ctx.trace_block = lambda b, env, fetches: trace_block(b, env, fetches, ctx)
            env = dict(zip(self._host_names, host_values))
            env.update(zip(feeds, feed_values))
            donated, kept = iter(donated_values), iter(kept_values)
            env.update((name, next(donated) if lends else next(kept))
                       for name, lends in zip(from_scope, self._donatable))
            try:
                values = trace_block(block, env, outs, ctx)
            finally:
                ctx.trace_block = None  # no cycle left between the context and the closure over it
            found.append(ctx)
            return values, _status(ctx, self.fetches)

        return step

    @property
    def compile_seconds_per_shape(self) -> float:
        """The mean compile of this block for one set of shapes so far (0 before the first)."""
        return self.compile_seconds / max(self.compiles, 1)

    def executable(self, feed_values: Sequence[Any], scope_values: Sequence[Any], keep_text: bool = False,
                   compile_new: bool = True) -> _Executable | None:
        """The executable for these arrays' shapes and dtypes (and the current History rows), compiled if new;
        None for new shapes when not ``compile_new``."""
        key = (self._rows, *[(tuple(v.shape), v.dtype) for v in (*feed_values, *scope_values)])
        with self._lock:
            found = self._executables.get(key)
            if found is not None and (found.text is not None or not keep_text):
                self._executables.move_to_end(key)
                return found
            quick = bool(self._executables) and key not in self._executables  # a new shape, not the block's first
        if not compile_new:
            return None
        start = time.perf_counter()
        ctxs: list[TraceContext] = []
        donated, kept = self._split(self.on_device(scope_values))
        on = {} if self.device is None else {"sharding": jax.sharding.SingleDeviceSharding(self.device)}
        host = tuple(jax.ShapeDtypeStruct(self.block.var(n).shape, self.block.var(n).dtype, **on)
                     for n in self._host_names)
        args = (tuple(self.on_device(feed_values)), donated, kept, host)
        donates = any(self._donatable) and not self._checks
        with x64():
            lowered = jax.jit(self._step(self._rows, ctxs), donate_argnums=(1,) if donates else ()).lower(*args)
            self._checks = bool(ctxs[-1].flags or ctxs[-1].overflow)
            if donates and self._checks:  # a run may fail or re-run after the call: keep the old values
                donates = False
                lowered = jax.jit(self._step(self._rows, ctxs)).lower(*args)
            text = lowered.as_text(debug_info=True) if keep_text else None
            compiled = lowered.compile(QUICK_COMPILE) if quick else lowered.compile()
        ctx = ctxs[-1]
        history_of = {n: k for k, n in enumerate(n for n in self.fetches if n in ctx.steps_of)}
        found = _Executable(compiled, ctx, history_of, time.perf_counter() - start, text, donates)
        found.quick = lowered if quick else None
        with self._lock:
            self.compiles += 1
            self.compile_seconds += found.seconds
            self._executables[key] = found
            while len(self._executables) > MAX_EXECUTABLES:
                self._executables.popitem(last=False)
        return found

    def _run_quick(self, exe: _Executable, seconds: float) -> None:
        """Count a quick executable's call; once its calls have taken longer than its compile, compile it with
        the default options in a background thread, for the calls after that (at most twice the time the
        better choice, known ahead, would have cost; no run waits for it)."""
        exe.run_seconds += seconds
        if exe.upgrading or exe.run_seconds <= UPGRADE_AFTER * exe.seconds:
            return
        exe.upgrading, lowered = True, exe.quick

        def compile_again() -> None:
            start = time.perf_counter()
            try:
                with background_preparation(), x64():
                    compiled = lowered.compile()
            except Exception:  # noqa: BLE001 - the quick executable serves on, as correct as ever
                return
            exe.upgrade.append((compiled, time.perf_counter() - start))

        # Not a daemon: a daemon thread killed inside XLA's C++ compiler aborts the process.
        threading.Thread(target=compile_again, name="gradgen-xla-compile-again", daemon=False).start()

    def _swap_in_upgrade(self, exe: _Executable) -> None:
        """Put a finished background compile of ``exe`` in its place (its first call lends copies, as any new
        executable's does)."""
        compiled, seconds = exe.upgrade.pop()
        exe.compiled, exe.quick, exe.proven = compiled, None, False
        self.compiles += 1
        self.compile_seconds += seconds

    def _split(self, scope_values: Sequence[Any]) -> tuple[tuple, tuple]:
        """(the scope values the run updates, the others), in ``from_scope`` order."""
        donated = tuple(v for v, lends in zip(scope_values, self._donatable) if lends)
        return donated, tuple(v for v, lends in zip(scope_values, self._donatable) if not lends)

    def _host_values(self) -> list:
        """The outputs of the block's ``HOST_COMPUTED`` ops, drawn once per run."""
        values = []
        for draw in self._host_draws:
            out = draw()
            values += list(out) if isinstance(out, tuple) else [out]
        return values

    # -- running ---------------------------------------------------------------------------------------------
    def on_device(self, values: Sequence[Any]) -> list:
        """``values`` placed on this block's device (a GPU), or as they are on the CPU (numpy arrays go in
        without a copy of their own)."""
        if self.device is None:
            return list(values)
        with x64():  # (outside it, jax would put a float64 array on the device as float32)
            return [jax.device_put(v, self.device) for v in values]

    def __call__(self, feed_values: Sequence[Any], scope_values: Sequence[Any], exe: _Executable | None = None
                 ) -> tuple[list, list]:
        """(fetched values, committed values) of one run, or the ExecutionError of its first failed check;
        ``exe``: these arrays' executable, when the caller has looked it up already."""
        feed_values, scope_values = self.on_device(feed_values), self.on_device(scope_values)
        host = tuple(self.on_device(self._host_values())) if self._host_ops else ()  # a re-run reuses them
        while True:
            exe = exe or self.executable(feed_values, scope_values)
            if exe.upgrade:
                self._swap_in_upgrade(exe)
            streams = {k: g.bit_generator.state for k, g in self._host_state.items()  # only a run that may
                       if isinstance(g, np.random.Generator)} if exe.ctx.overflow else {}  # re-run needs them
            donated, kept = self._split(scope_values)
            called = time.perf_counter()
            with x64():
                if exe.donates and not exe.proven:  # once per executable: the copies are lent, not the scope's
                    donated = tuple(jnp.array(v, copy=True) if own_array(v) else v for v in donated)
                values, status = exe.compiled(tuple(feed_values), donated, kept, host)
            status = np.asarray(status) if status is not None else _NO_STATUS  # waits for the run
            if exe.quick is not None:  # (waiting for its values, so that the count is the call's time)
                self._run_quick(exe, time.perf_counter() - called if status.size else _waited(values, called))
            at = 1 if exe.ctx.overflow else 0
            if at and status[0]:  # a loop ran past its History rows below max_iterations
                self._rows *= 4
                for k, state in streams.items():  # the re-run draws what this run drew (the step is pure)
                    self._host_state[k].bit_generator.state = state
                exe = None
                continue
            break
        exe.proven = True
        passed, steps = status[at:at + len(exe.ctx.flags)], status[at + len(exe.ctx.flags):]
        if not passed.all():
            check = exe.ctx.checks[int(np.argmin(passed))]  # the first that failed
            raise ExecutionError(f"{check.where}: {check.message}")
        n = len(self.fetches)
        fetched = list(values[:n])
        for name, k in exe.history_of.items():  # a fetched History holds its loop's rows only
            where = self.fetches.index(name)
            fetched[where] = fetched[where][:int(steps[k])]
        return fetched, list(values[n:])
