"""``runtime/preparation_clock``: what a preparation would take alone is its CPU time (its own thread's and the
threads it starts), not the time it spends waiting beside other work, and never more than its wall time."""
from __future__ import annotations

import threading
import time

import pytest

from gradgen.framework.runtime import preparation_clock
from gradgen.framework.runtime.preparation_clock import PreparationClock


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_waiting_is_not_counted():
    clock = PreparationClock()
    time.sleep(0.3)
    assert clock.seconds() >= 0.3 and clock.alone() < 0.1


def test_its_own_computing_is_counted():
    clock = PreparationClock()
    _spin(0.3)
    assert 0.25 <= clock.alone() <= clock.seconds()


def test_the_threads_it_starts_are_counted_and_the_others_are_not():
    stop, done = threading.Event(), threading.Event()
    beside = threading.Thread(target=lambda: [_spin(0.01) for _ in iter(stop.is_set, True)])  # other work
    beside.start()
    pool = threading.Thread(target=lambda: (_spin(0.3), done.set(), stop.wait(30)))  # (a compiler's pool, kept)
    try:
        clock = PreparationClock()
        pool.start()
        done.wait(30)
        alone = clock.alone()
    finally:
        stop.set()
        beside.join()
        pool.join()
    assert 0.25 <= alone <= clock.seconds()
    assert alone < 0.3 + 0.15  # (the work beside it, which ran as long, adds nothing: at most the clock's ticks)


def test_without_proc_it_is_the_wall_time(monkeypatch):
    monkeypatch.setattr(preparation_clock, "_TASKS", "/nonexistent/task")
    clock = PreparationClock()
    time.sleep(0.2)
    assert clock.alone() == pytest.approx(clock.seconds(), abs=0.05) and clock.alone() >= 0.2


def test_the_preparations_beside_it_are_not_counted():
    """A trial starts torch's and xla's preparations together: each one's clock leaves the other's thread out."""
    done, stop = threading.Event(), threading.Event()
    other = threading.Thread(target=lambda: (_spin(0.3), done.set(), stop.wait(30)), name="the other preparation")
    clock = PreparationClock(lambda: {other.native_id})
    try:
        other.start()
        done.wait(30)
        alone = clock.alone()
    finally:
        stop.set()
        other.join()
    assert alone < 0.15
