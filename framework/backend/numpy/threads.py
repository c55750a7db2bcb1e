"""How many threads the numpy engine's BLAS products use: what the user set, or the cores other work leaves free
(``shared/cores.free_cores``).

``blas_threads(n)`` runs a block with numpy's OpenBLAS and gradgen's GEMM provider (``blas.PROVIDER``, MKL where
chosen) at ``n`` threads and puts the counts the process had back after it, so the user's own numpy products
outside a run keep theirs. (The torch engine uses it too: its products run on numpy's OpenBLAS.)
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any, Callable, Iterator, NamedTuple

from . import blas

__all__ = ["blas_threads"]


class _Pool(NamedTuple):
    """A BLAS library's thread count: ``get`` (the count a product on the calling thread runs with) and ``put``;
    ``local``: ``put`` sets the calling thread's own count and returns the one it replaces (MKL's ``_Local``
    call), else it sets the process's."""
    get: Callable[[], int]
    put: Callable[[int], Any]
    local: bool


def _pool(lib: ctypes.CDLL, get_name: str, set_name: str, local: bool = False) -> _Pool | None:
    """A BLAS library's pool by the names of its two calls, or None where it lacks them."""
    try:
        get, put = getattr(lib, get_name), getattr(lib, set_name)
    except AttributeError:
        return None
    get.restype, put.argtypes, put.restype = ctypes.c_int, [ctypes.c_int], ctypes.c_int if local else None
    return _Pool(get, put, local)


def _pools() -> list[_Pool]:
    """Every BLAS pool gradgen's products reach: numpy's OpenBLAS and, where it is another library, the GEMM
    provider. MKL's count is set for the calling thread (the run's, where its products run): once torch has set
    its own thread count (``torch.set_num_threads``: the torch engine's runs do), MKL's process-wide count no longer
    reaches the threads that did: on a 2-core Intel Xeon, MKL's pool read 2 inside a block of 1, so a numpy run
    after a torch-engine run (``backend="auto"``'s checks) kept two MKL threads on a busy core."""
    pools = []
    numpy_blas = blas.numpy_openblas()
    if numpy_blas is not None and (pool := _pool(numpy_blas.lib, "scipy_openblas_get_num_threads64_",
                                                 "scipy_openblas_set_num_threads64_")):
        pools.append(pool)
    provider = blas.PROVIDER
    if provider is not None and provider.name == "mkl" and (
            pool := _pool(provider.lib, "MKL_Get_Max_Threads", "MKL_Set_Num_Threads_Local", local=True)):
        pools.append(pool)
    return pools


_POOLS: list | None = None
_LOCK = threading.Lock()
_ACTIVE = {"runs": 0, "counts": []}
"""How many ``blas_threads`` blocks are open (runs of several executors may overlap) and the pools' counts before
the first of them opened: what the last one to close puts back."""


@contextlib.contextmanager
def blas_threads(n: int, exact: bool = False) -> Iterator[int]:
    """Run the block with every BLAS pool at ``n`` threads, or (``exact`` False) at ``n`` or the pool's own count
    if that is smaller (a limit the user set, ``OPENBLAS_NUM_THREADS`` or threadpoolctl's, stands); yields the
    count numpy's pool runs at (``n`` where no pool is found). The pools get the counts they had back when the
    last open block closes (blocks of other threads may overlap)."""
    global _POOLS
    with _LOCK:
        if _POOLS is None:
            _POOLS = _pools()
        if _ACTIVE["runs"] == 0:
            _ACTIVE["counts"] = [pool.get() for pool in _POOLS]
        _ACTIVE["runs"] += 1
        wanted = [n if exact else min(n, was) for was in _ACTIVE["counts"]]
        replaced = [pool.put(want) for pool, want in zip(_POOLS, wanted) if pool.local]  # (this thread's, put back)
        for pool, want in zip(_POOLS, wanted):
            if not pool.local and pool.get() != want:
                pool.put(want)
    try:
        yield wanted[0] if wanted else n
    finally:
        with _LOCK:
            for pool, was in zip((pool for pool in _POOLS if pool.local), replaced):
                pool.put(was)
            _ACTIVE["runs"] -= 1
            if _ACTIVE["runs"] == 0:
                for pool, was in zip(_POOLS, _ACTIVE["counts"]):
                    if not pool.local and pool.get() != was:
                        pool.put(was)

