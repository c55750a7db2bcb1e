"""Keep freed large blocks in the process for the next step instead of handing them back to the system.

A training step allocates the same large arrays every step. With glibc's defaults, a freed block of a few MiB is
unmapped or trimmed off the heap at once and the next step maps it again and takes a page fault for each of its
pages: on the ResNet workload a fifth of the torch engine's step went to that (design_docs/executor.md,
*Freed memory*). Allocators built for this work (jemalloc, tcmalloc, which PyTorch's and TensorFlow's tuning guides
recommend preloading) keep such blocks; gradgen does the same with glibc's own knobs, ``mallopt``, the first time
an ``Executor`` is made: every block comes from the heap (glibc maps none alone: ``M_MMAP_MAX`` 0, since its
threshold for mapping a block alone stops at 32 MiB, ``MMAP_THRESHOLD``, and a large MLP's weight gradients are 64
MiB) and free memory at the heap's top is given back only past ``TRIM_THRESHOLD``. The process's peak resident
memory is unchanged; what a finished training holds at rest may be higher, up to its peak.

Blocks over 32 MiB, mapped alone, cost most where the process pauses between steps: on the 2-core AMD EPYC VM the
anchors' large MLP (512 x 4096 x 4096 x 1000, float32, three fresh 64 MiB arrays a step) took 330-370 ms a step
right after the one before, and 610-870 ms in one step of three after a 0.5 s pause (the host faulting the freed
memory in again); with every block kept, 330-450 ms after every pause (``design_docs/executor.md``, *Freed
memory*).

Left as it is: a process that is not on glibc, one that set any ``MALLOC_*_`` variable itself (its owner chose),
or one run with ``GRADGEN_MALLOC=system``.
"""
from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["KEEP_ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_blocks"]

KEEP_ENV = "GRADGEN_MALLOC"
"""``system`` leaves the process's allocator settings alone."""
MMAP_THRESHOLD = 32 << 20
"""Blocks of at most 32 MiB come from the heap (glibc's own dynamic threshold never goes above this, and mallopt
refuses more); with ``M_MMAP_MAX`` 0 the larger ones do too, and this stands should that be refused."""
TRIM_THRESHOLD = 1 << 30
"""Free memory at the heap's top is given back to the system only past 1 GiB."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # glibc's malloc.h
_done: list[bool] = []


def keep_freed_blocks() -> bool:
    """Set glibc's thresholds once per process (see the module's docstring); True if they are set now."""
    if _done:
        return _done[0]
    _done.append(False)
    if os.environ.get(KEEP_ENV) == "system" or platform.libc_ver()[0] != "glibc":
        return False
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(None)
        settings = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_MMAP_MAX, 0))
        ok = all(libc.mallopt(option, value) == 1 for option, value in settings)
    except (OSError, AttributeError):
        return False
    _done[0] = ok
    return ok
