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
from typing import Callable, Iterator

from . import blas

__all__ = ["blas_threads"]


def _thread_calls(lib: ctypes.CDLL, get_name: str, set_name: str
                  ) -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """A BLAS library's (get thread count, set thread count) functions, or None where it lacks them."""
    try:
        get, put = getattr(lib, get_name), getattr(lib, set_name)
    except AttributeError:
        return None
    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
    return get, put


def _pools() -> list[tuple[Callable[[], int], Callable[[int], None]]]:
    """(get, set) of every BLAS pool gradgen's products reach: numpy's OpenBLAS and, where it is another
    library, the GEMM provider."""
    pools = []
    numpy_blas = blas.numpy_openblas()
    if numpy_blas is not None and (calls := _thread_calls(numpy_blas.lib, "scipy_openblas_get_num_threads64_",
                                                          "scipy_openblas_set_num_threads64_")):
        pools.append(calls)
    provider = blas.PROVIDER
    if provider is not None and provider.name == "mkl" and (
            calls := _thread_calls(provider.lib, "MKL_Get_Max_Threads", "MKL_Set_Num_Threads")):
        pools.append(calls)
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
            _ACTIVE["counts"] = [get() for get, _ in _POOLS]
        _ACTIVE["runs"] += 1
        wanted = [n if exact else min(n, was) for was in _ACTIVE["counts"]]
        for (get, put), want in zip(_POOLS, wanted):
            if get() != want:
                put(want)
    try:
        yield wanted[0] if wanted else n
    finally:
        with _LOCK:
            _ACTIVE["runs"] -= 1
            if _ACTIVE["runs"] == 0:
                for (get, put), was in zip(_POOLS, _ACTIVE["counts"]):
                    if get() != was:
                        put(was)
