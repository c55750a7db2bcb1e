"""Regions compile away from the run: runs go on op by op meanwhile, a Ctrl-C cannot break numba, the work per
plan is bounded, and ``wait_for_compiles`` makes it deterministic for tests."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from gradgen.framework import Executor
from gradgen.framework.backend.numpy import jit
from gradgen.framework.backend.numpy.compile_queue import Budget, wait_for_compiles
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard
from tests.extras import require

PLAIN = PlanOptions(regions=False)


@pytest.fixture(autouse=True)
def _numba():
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")


def _chains(count: int, length: int):
    """``count`` chains of ``length`` small ops, each ending in a big product (which stays outside regions), so
    each chain is one region. A constant new in every call makes sources numba has not compiled before."""
    unique = 1.0 + (time.monotonic_ns() % 10 ** 9) / 10 ** 12
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 8], "float64")
        big = layers.data("big", [8, 4096], "float64")
        outs = []
        for k in range(count):
            h = x
            for _ in range(length):
                h = layers.tanh(layers.scale(h, unique, float(k)))
            outs.append(h @ big)
    feed = {"x": np.linspace(-1, 1, 32).reshape(4, 8), "big": np.ones((8, 4096))}
    return main, outs, feed


def _regions(exe, main, feed, fetch):
    steps = exe.plan_for(main, list(feed), [v.name for v in fetch]).steps
    return [s.fn for s in steps if getattr(s.fn, "region", False)]


def test_runs_go_on_op_by_op_until_the_worker_has_compiled_the_region():
    main, fetch, feed = _chains(1, 3)
    exe = Executor(options=PlanOptions(), check_types=False)  # warm_runs=2, in background
    want = Executor(options=PLAIN, check_types=False).run(main, feed=feed, fetch_list=fetch)
    for _ in range(3):
        got = exe.run(main, feed=feed, fetch_list=fetch)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    (region,) = _regions(exe, main, feed, fetch)
    assert wait_for_compiles(timeout=300)
    got = exe.run(main, feed=feed, fetch_list=fetch)
    assert region.compiled()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_a_ctrl_c_while_a_run_waits_for_a_compile_leaves_numba_working():
    """The run is interrupted while it waits; the compile goes on elsewhere and numba compiles what comes next."""
    main, fetch, feed = _chains(1, 6)
    exe = Executor(options=PlanOptions(warm_runs=0, background_compile=False),
                   check_types=False)
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        exe.run(main, feed=feed, fetch_list=fetch)
        time.sleep(5)  # the compile took under 0.05 s: wait for the interrupt here
    timer.join()
    assert wait_for_compiles(timeout=300)
    (region,) = _regions(exe, main, feed, fetch)
    assert region.compiled()
    other, other_fetch, _ = _chains(1, 4)
    exe2 = Executor(options=PlanOptions(warm_runs=0, background_compile=False),
                    check_types=False)
    got = exe2.run(other, feed=feed, fetch_list=other_fetch)
    assert all(fn.compiled() for fn in _regions(exe2, other, feed, other_fetch))
    want = Executor(options=PLAIN, check_types=False).run(other, feed=feed, fetch_list=other_fetch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_a_plan_compiles_no_more_ops_than_its_budget(monkeypatch):
    monkeypatch.setattr(Budget, "OPS", 9)  # room for one region of 6 ops, not two
    main, fetch, feed = _chains(3, 3)
    exe = Executor(options=PlanOptions(warm_runs=0, background_compile=False),
                   check_types=False)
    got = exe.run(main, feed=feed, fetch_list=fetch)
    regions = _regions(exe, main, feed, fetch)
    assert len(regions) == 3 and [fn.compiled() for fn in regions].count(True) == 1
    want = Executor(options=PLAIN, check_types=False).run(main, feed=feed, fetch_list=fetch)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_a_compiled_region_no_faster_than_its_ops_one_by_one_is_dropped(monkeypatch):
    """Every timed call takes one tick of a fake clock: the compiled region measures no faster than its ops one
    by one, so after its trial calls the step goes back to the ops (and their exact results)."""
    from gradgen.framework.backend.numpy import fuse_region

    class Clock:
        now = 0.0

        def perf_counter(self):
            Clock.now += 1e-6
            return Clock.now

    monkeypatch.setattr(fuse_region, "time", Clock())
    main, fetch, feed = _chains(1, 3)
    exe = Executor(options=PlanOptions(), check_types=False)
    want = Executor(options=PLAIN, check_types=False).run(main, feed=feed, fetch_list=fetch)
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=fetch)
    assert wait_for_compiles(timeout=300)
    (region,) = _regions(exe, main, feed, fetch)
    for trial in range(fuse_region._TRIALS):
        assert region.compiled()
        exe.run(main, feed=feed, fetch_list=fetch)
    assert not region.compiled()
    np.testing.assert_array_equal(exe.run(main, feed=feed, fetch_list=fetch)[0], want[0])


_SCRIPT = """
import numpy as np
from gradgen.framework import Executor
from gradgen.framework.backend.numpy.compile_queue import wait_for_compiles
from gradgen.program import Program, layers, program_guard
main = Program()
with program_guard(main, Program()):
    x = layers.data("x", [-1, 8], "float64")
    h = x
    for _ in range(6):
        h = layers.tanh(layers.scale(h, 1.000123, 0.5))
    out = h @ layers.data("big", [8, 4096], "float64")
exe, feed = Executor(check_types=False), {"x": np.ones((4, 8)), "big": np.ones((8, 4096))}
for _ in range(4):
    exe.run(main, feed=feed, fetch_list=[out])
assert wait_for_compiles(120)
regions = [s.fn for s in exe.plan_for(main, list(feed), [out.name]).steps if getattr(s.fn, "region", False)]
assert regions
exe.run(main, feed=feed, fetch_list=[out])
print("compiled" if all(r.compiled() for r in regions) else "not compiled")
"""


def test_a_users_module_that_prints_on_import_cannot_break_the_compile_process(tmp_path):
    """The script's folder is on the compile process's path (last): a module there named like one some library
    tries to import (``nt``), printing on import, once garbled the process's answers and every region failed."""
    import subprocess
    import sys

    (tmp_path / "nt.py").write_text("print('hello from a user module')\n")
    (tmp_path / "train.py").write_text(_SCRIPT)
    env = dict(os.environ, GRADGEN_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(tmp_path / "train.py")], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("compiled") and "not compiled" not in done.stdout, done.stdout
