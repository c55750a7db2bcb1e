"""XLA's CPU thread pool, sized by ``Executor(threads=N)``.

XLA makes its CPU pool once per process, when jax makes its CPU client, with one thread per CPU the process may
run on; neither a jax option nor ``XLA_FLAGS`` changes that in jax 0.10 (``--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` left a jitted product on two threads: cpu/wall 1.95, as without it). The way
jax's maintainers give is the affinity mask (jax-ml/jax#1539), so the first executor that asks for N threads on
xla makes the client itself, with its own thread's mask cut to N CPUs for that moment: the pool is N threads,
pinned to those CPUs, and every other thread keeps its mask. A client made before (by a run with no thread count,
or by jax in the caller's own code) keeps its pool; asking for another count then is an error that says so.
Whether the client exists is jax's private ``xla_bridge.backends_are_initialized`` (no public call says it; the
``xla`` extra pins jax's minor release).
"""
from __future__ import annotations

import os

import jax
from jax._src import xla_bridge

from ...errors import ExecutionError

__all__ = ["pool_threads", "size_pool"]

_sized: list[int] = []
"""The pool size this module gave jax's CPU client, if it made the client."""


def pool_threads() -> int | None:
    """The threads of XLA's CPU pool if gradgen sized it, else None (jax's own: one per usable CPU)."""
    return _sized[0] if _sized else None


def size_pool(threads: int | None) -> None:
    """Make jax's CPU client now with a pool of ``threads`` threads (None: leave jax to make it, as it likes,
    when first needed), or check that the client already made has that many."""
    if threads is None:
        return
    if xla_bridge.backends_are_initialized():
        if pool_threads() == threads:
            return
        raise ExecutionError(f"threads={threads}: XLA's CPU thread pool was made when jax started in this process "
                             f"({pool_threads() or 'one thread per usable CPU'}) and cannot change; give threads to "
                             f"the first executor that runs on xla, or start the process with its CPUs limited "
                             f"(taskset -c 0-{threads - 1} python ...)")
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        raise ExecutionError(f"threads={threads}: the xla backend sizes XLA's pool through the CPU affinity mask, "
                             f"which this platform does not have; leave threads to None") from None
    chosen = cpus[:threads]
    os.sched_setaffinity(0, chosen)
    try:
        jax.devices("cpu")
    finally:
        os.sched_setaffinity(0, cpus)
    _sized.append(len(chosen))
