"""Runs on the torch engine (``Executor(backend="torch")``): block 0 walked op by op on PyTorch CPU tensors
(eager ATen: oneDNN convolutions), the numpy runner's contract around it, with torch's threads set per run to the
cores other work leaves free (``_threads``).

A run: look up (or build) the steps for this program version and these feed and fetch names (``walk``), refusing
a program with an op the engine cannot run before anything runs (``refused``); check the feeds and the scope's
values against their declared types (``shared/conformance``) and view them as tensors (no copy: the kernels never
write into an input); walk the steps; then, only if every op succeeded, write the persistables the run changed
into the scope as numpy arrays, all at once. Fetched values are numpy arrays the caller owns. A profiling
executor's steps are built timed (``walk.build_steps``): its profile has a row per op, as the numpy engine's.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch

from ...errors import ExecutionError
from ...runtime.per_version import PerVersion
from ...runtime.place import CPUPlace
from ...runtime.scope import Scope
from .. import RunSettings
from ..shared.conformance import checked_feeds, declared, scope_value
from ..shared.signature import run_signature
from ..numpy.threads import blas_threads  # its products may run on numpy's OpenBLAS (PRODUCT_THREADS)
from ..shared.cores import cores_for_runs
from .kernels.finite import broadcast_dims, remembered_finite
from .kernels.linalg import KERNELS as PRODUCT_KERNELS, torch_is_faster
from .refused import problems
from .walk import build_steps, compile_walk

__all__ = ["TorchRunner", "make_runner"]

NAME = "torch"


def make_runner(settings: Callable[[], RunSettings]) -> "TorchRunner":
    """The torch engine's runner (``backend.runner``): CPU only; it checks every op's output type itself and has
    no per-op NaN checks or plan options, so an executor asking for those is refused."""
    given = settings()
    if not isinstance(given.place, CPUPlace):
        raise ExecutionError(f"the torch backend runs on the CPU here; {given.place!r} needs backend='xla'")
    if given.check_nan_inf or given.options is not None:
        raise ExecutionError(f"check_nan_inf and options are numpy-backend settings; backend '{NAME}' checks every "
                             "output's type and has no per-op NaN checks")
    return TorchRunner(settings)


PRODUCT_THREADS = 1
"""numpy's BLAS threads for the engine's products where they run on numpy's (``kernels/linalg.matmul``): one, the
engine's parallel work being torch's pool. Two pools of two threads each on two cores thrash: after each ATen op
torch's OpenMP threads spin on the cores OpenBLAS's threads then want. Measured in one process, interleaved, torch
at two threads: the anchors' LeNet step took 28.4 ms with OpenBLAS at two threads and 3.8 with one (PyTorch's own
2.3 beside them, 5.3 beside the thrashing engine); the transformer 345 and 125 ms."""

_OWN_THREADS = torch.get_num_threads()
"""torch's own intra-op thread count (its default, or what the process set before the engine was loaded)."""


@contextmanager
def _threads(n: int | None) -> Iterator[int]:
    """torch's intra-op threads for the run (then put back), yielded: ``n`` (``Executor(threads=N)``), else the
    cores other work leaves free (``cores_for_runs``), at most torch's own count. torch's OpenMP threads spin
    against other work: on a loaded 2-core machine two threads ran the anchors' transformer step in 2440 ms, one
    in 543."""
    n = n if n is not None else min(cores_for_runs(), _OWN_THREADS)
    before = torch.get_num_threads()
    if n == before:
        yield n
        return
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)


def _tensor(value: np.ndarray) -> torch.Tensor:
    """A tensor sharing ``value``'s memory where torch can (a read-only or reversed array is copied)."""
    value = np.asarray(value)
    if not value.flags.writeable or any(s < 0 for s in value.strides) or not value.dtype.isnative:
        value = np.array(value)
    return torch.from_numpy(value)


class _Entry:
    def __init__(self, block, sig, feed_names: Sequence[str], profiler=None):
        self.sig = sig
        timer = None if profiler is None else lambda fn, ops, kind: profiler.timed(fn, block, ops, kind, NAME)
        self.steps = build_steps(block, sig, timer)
        self.walk = compile_walk(block, self.steps)
        self.has_products = any(block.ops[i].type in PRODUCT_KERNELS for step in self.steps for i in step.ops)
        """Whether a step multiplies matrices: the run then has its products' provider chosen before the first
        step (``torch_is_faster``), so that the ~0.2 s of that measurement shows in the profile's plan phase, not
        in the first product's row."""
        self.declared = {n: declared(block.var(n)) for n in (*feed_names, *sig.from_scope)}


class TorchRunner:
    """One executor's runs on torch: steps cached per program version, feed and fetch names."""

    name = NAME

    def __init__(self, settings: Callable[[], RunSettings]):
        self._settings = settings
        self._entries = PerVersion()

    @staticmethod
    def problems(block) -> list[str]:
        """The ops of ``block`` the torch engine cannot run (``refused.problems``)."""
        return problems(block)

    def entry_for(self, program, feed_names: Sequence[str], fetch_names: Sequence[str],
                  built: Callable[[float], None]) -> _Entry:
        per_program = self._entries.entries(program)
        key = (tuple(sorted(feed_names)), tuple(fetch_names))
        entry = per_program.get(key)
        if entry is None:
            start = time.perf_counter()
            block = program.global_block()
            found = problems(block)
            if found:
                raise ExecutionError(f"the {NAME} backend cannot run this program ({len(found)} op"
                                     f"{'s' if len(found) > 1 else ''}):\n  " + "\n  ".join(found))
            entry = _Entry(block, run_signature(block, key[0], key[1]), key[0], self._settings().profiler)
            per_program[key] = entry
            built(time.perf_counter() - start)
        return entry

    def prepare(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope) -> None:
        """Build the steps of runs with these names before the first (``backend="auto"`` does it in a background
        thread, so that neither torch's import nor a refusal costs a run); an ExecutionError where the engine
        cannot run the program."""
        self.entry_for(program, list(feed), list(fetch_names), lambda seconds: None)

    def run(self, program, feed: Mapping[str, Any], fetch_names: Sequence[str], scope: Scope, return_numpy: bool,
            mark: Callable[[str], None], built: Callable[[float], None], agreed: Callable[[], None]) -> list:
        """One run: the fetched arrays (numpy's, the caller's own); the scope gets the changed persistables only if
        the whole run succeeds."""
        given = self._settings()
        with scope.run_lock, _threads(given.threads) as pool, blas_threads(PRODUCT_THREADS), \
                torch.inference_mode(), remembered_finite(), np.errstate(all="ignore"):  # (as numpy's ``run_plan``)
            if given.profiler is not None:
                given.profiler.ran_threads(program, pool)
            entry = self.entry_for(program, list(feed), fetch_names, built)
            if entry.has_products:
                torch_is_faster(pool)  # (measured once per thread count in a process; a lookup after)
            mark("plan")
            block, sig = program.global_block(), entry.sig
            checked = checked_feeds(block, feed, entry.declared)
            inputs = {name: checked[name] for name in sig.feeds if name in checked}
            for name in sig.from_scope:
                if name not in inputs:
                    inputs[name] = scope_value(block, scope, name, entry.declared[name])
            env = {name: _tensor(value) for name, value in inputs.items()}
            shared = {t.untyped_storage().data_ptr() for t in env.values() if t.numel()}
            mark("feeds")
            entry.walk(env)
            agreed()
            mark("loop")
            new = {name: self._own(env[name], shared) for name in sig.commits if name not in feed and name in env}
            scope.update(new)
            mark("commit")
            fetched = [np.array(env[name].numpy()) for name in sig.fetches]
        env.clear()
        mark("fetch")
        return fetched

    @staticmethod
    def _own(value: torch.Tensor, shared: set) -> np.ndarray:
        """``value`` as a numpy array the scope may keep: a copy where it shares memory with a fed or scope array
        (an ``assign``, a view) or where its elements overlap (a broadcast view, one number at many places), else
        a view of the kernel's own tensor."""
        if value.numel() and (value.untyped_storage().data_ptr() in shared or broadcast_dims(value)):
            return np.array(value.numpy())
        return value.numpy()
