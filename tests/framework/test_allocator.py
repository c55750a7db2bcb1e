"""The Executor keeps freed large blocks in the process (runtime/allocator.py): a block freed by one step (a few
MiB, or a hundred) is there for the next instead of being unmapped and faulted in again; the owner's own settings
win."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

_PROBE = """
import numpy as np
from gradgen.framework import Executor
from gradgen.framework.runtime.allocator import keep_freed_blocks

def rss_pages():
    return int(open("/proc/self/statm").read().split()[1])

Executor()
print(keep_freed_blocks())
for mib in (16, 96):  # glibc maps a fresh 16 MiB block alone (the first of its size), and one over 32 MiB always
    block = np.ones(mib << 20, np.uint8)
    before = rss_pages()
    del block
    print((before - rss_pages()) * 4096 >> 10)  # KiB; below 0 where a page was touched meanwhile
"""


def _probe(**env: str) -> tuple[str, int, int]:
    """(keep_freed_blocks() after an Executor was made, KiB handed back to the system when a 16 MiB block dies, and
    when a 96 MiB one does; the resident size may also grow by a page between the two reads, so a kept block reads as
    0 or a few KiB below)."""
    clean = {k: v for k, v in os.environ.items() if not (k.startswith("MALLOC_") or k == "GRADGEN_MALLOC")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env}, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return out[0], int(out[1]), int(out[2])


def test_an_executor_keeps_a_freed_block_in_the_process():
    kept, given_back, large_given_back = _probe()
    assert kept == "True"
    assert given_back < 1024 and large_given_back < 1024  # not even a MiB of either block went back


def test_the_system_allocator_when_asked():
    kept, given_back, large_given_back = _probe(GRADGEN_MALLOC="system")
    assert kept == "False"
    assert given_back >= 15 << 10 and large_given_back >= 95 << 10  # glibc's default: mapped alone, unmapped at once


def test_the_owners_malloc_variables_win():
    kept, given_back, large_given_back = _probe(MALLOC_MMAP_THRESHOLD_="131072")
    assert kept == "False"
    assert given_back >= 15 << 10 and large_given_back >= 95 << 10
