"""Scratch arrays: reused per purpose within a thread, never shared between threads, huge ones not kept."""
from __future__ import annotations

import threading

import numpy as np

from gradgen.framework.backend.numpy.kernels import scratch as scratch_module
from gradgen.framework.backend.numpy.kernels.scratch import scratch


def test_a_purpose_reuses_its_memory_and_grows_when_asked_for_more():
    a = scratch("test a", (3, 4), np.float32)
    b = scratch("test a", (2, 5), np.float32)
    assert b.shape == (2, 5) and b.dtype == np.float32 and b.flags.c_contiguous
    assert np.shares_memory(a, b)
    assert not np.shares_memory(b, scratch("test b", (2, 5), np.float32))  # another purpose
    assert not np.shares_memory(b, scratch("test a", (2, 5), np.float64))  # another dtype
    bigger = scratch("test a", (100, 100), np.float32)
    assert bigger.shape == (100, 100) and np.shares_memory(bigger, scratch("test a", (4,), np.float32))


def test_threads_get_their_own_arrays():
    mine = scratch("test threads", (8,), np.float64)
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(scratch("test threads", (8,), np.float64)))
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, theirs[0])


def test_huge_arrays_are_not_kept(monkeypatch):
    monkeypatch.setattr(scratch_module, "_KEEP_BYTES", 1000)
    first = scratch("test huge", (500,), np.float64)
    assert not np.shares_memory(first, scratch("test huge", (500,), np.float64))
