"""Data-parallel training on 2 and 4 MPI processes: equal to one process on the whole batch, failures that end
the job, checkpoints across ranks, and the command line. Every run has a timeout."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.framework.runtime import communicator as comm_module
from gradgen.framework.runtime.communicator import Solo, init_parallel

from .cases import CASES, CONTRAST, XLA_CASES, save_case, train
from .launch import ROOT, TIMEOUT, mpiexec, run_ranks

RANKS = (2, 4)


@functools.lru_cache(maxsize=None)
def reference(case: str) -> dict:
    """One process, the program without the pass, the whole batch at every step."""
    init_parallel(Solo())
    try:
        return train(case, parallel=False)
    finally:
        comm_module._current.clear()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """n -> the directory where rank 0 of an n-rank run of every case wrote its results."""
    out = {}
    for n in RANKS:
        where = tmp_path_factory.mktemp(f"ranks{n}")
        result = run_ranks(n, sys.executable, "-m", "tests.distributed.worker", "train", str(where))
        assert result.returncode == 0, result.stderr
        out[n] = where
    return out


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("case", CASES)
def test_n_ranks_train_as_one_process_on_the_concatenated_batch(trained, case, n):
    got = np.load(trained[n] / f"{case}.npz")
    assert bool(got["@identical"]), "the ranks ended with different values"
    ref = reference(case)
    assert set(got.files) == set(ref) | {"@identical"}
    for name, value in ref.items():
        scale = max(float(np.max(np.abs(value))), 1e-300) if value.size else 1.0
        worst = float(np.max(np.abs(got[name] - value))) if value.size else 0.0
        assert worst <= 1e-12 * scale, f"{case} on {n} ranks: {name} differs by {worst:.3g} (scale {scale:.3g})"


def test_on_the_xla_backend_two_ranks_train_as_one_numpy_process(tmp_path):
    """The data-parallel step compiles whole on xla (its collectives are ordered host callbacks): two ranks equal
    one numpy process on the concatenated batch to 1e-12 (float64), in each of ``cases.XLA_CASES``."""
    from tests.backends.xla_harness import need_jax

    need_jax()
    result = run_ranks(2, sys.executable, "-m", "tests.distributed.worker", "train_xla", str(tmp_path))
    assert result.returncode == 0, result.stderr
    for case in XLA_CASES:
        got, ref = np.load(tmp_path / f"{case}.npz"), reference(case)
        assert bool(got["@identical"]), f"{case}: the ranks ended with different values"
        for name, value in ref.items():
            scale = max(float(np.max(np.abs(value))), 1e-300) if value.size else 1.0
            worst = float(np.max(np.abs(got[name] - value))) if value.size else 0.0
            assert worst <= 1e-12 * scale, f"{case} on xla: {name} differs by {worst:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("case", CONTRAST)
def test_clipping_by_each_ranks_local_norm_would_not_match(trained, case, n):
    got = np.load(trained[n] / f"{case}.npz")
    ref = reference(case.removesuffix("-local"))
    assert max(float(np.max(np.abs(got[k] - ref[k]))) for k in ref if ref[k].size) > 1e-6


def test_the_startup_broadcast_gives_every_rank_rank_zeros_values(tmp_path):
    result = run_ranks(4, sys.executable, "-m", "tests.distributed.worker", "broadcast", str(tmp_path))
    assert result.returncode == 0, result.stderr
    held = np.load(tmp_path / "broadcast.npz")["held"]
    np.testing.assert_array_equal(held, np.full((4, 3), 7.0))


@pytest.mark.parametrize("n", RANKS)
def test_a_rank_that_raises_ends_the_job_with_its_error(tmp_path, n):
    begin = time.monotonic()
    result = run_ranks(n, sys.executable, "-m", "tests.distributed.worker", "raise", str(tmp_path), timeout=60)
    assert result.returncode != 0
    assert time.monotonic() - begin < 60
    assert f"gradgen: rank 1 of {n}: error: ValueError: rank one fails on purpose" in result.stderr
    assert "Traceback" in result.stderr  # the failing rank's own traceback


def _gradgen(*args):
    return [sys.executable, "-m", "gradgen.framework", *map(str, args)]


def test_checkpoints_saved_on_two_ranks_resume_on_four(tmp_path):
    """gradgen run on 2 ranks for 10 steps, save; resume on 4 ranks for 10 more: as 20 steps in one process."""
    main, startup, loss, batch, feeds = save_case("cnn-momentum", tmp_path)
    made = run_ranks(1, *_gradgen("data-parallel", tmp_path / "main.json", "--startup", tmp_path / "startup.json",
                                  "-o", tmp_path / "dp.json", "--startup-output", tmp_path / "dp_startup.json"))
    assert made.returncode == 0, made.stderr
    first = run_ranks(2, *_gradgen("run", tmp_path / "dp.json", "--startup", tmp_path / "dp_startup.json", *feeds,
                                   "--shard", "--fetch", "loss", "--steps", 10, "--save-params", tmp_path / "a.npz"))
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("wrote ") == 1 and first.stdout.count("loss: ") == 1  # rank 0 alone speaks
    second = run_ranks(4, *_gradgen("run", tmp_path / "dp.json", "--startup", tmp_path / "dp_startup.json", *feeds,
                                    "--params", tmp_path / "a.npz", "--shard", "--fetch", "loss", "--steps", 10,
                                    "--save-params", tmp_path / "b.npz"))
    assert second.returncode == 0, second.stderr
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == ["a.npz", "b.npz"]

    exe, scope = Executor(), Scope()
    init_parallel(Solo())
    try:
        exe.run(startup, scope=scope)
        for _ in range(20):
            exe.run(main, feed=batch, fetch_list=[loss], scope=scope)
    finally:
        comm_module._current.clear()
    resumed = np.load(tmp_path / "b.npz")
    for name in resumed.files:
        ref = np.array(scope[name])
        assert float(np.max(np.abs(resumed[name] - ref), initial=0.0)) <= 1e-12 * max(float(np.max(np.abs(ref))), 1)
    halfway = np.load(tmp_path / "a.npz")
    assert not np.array_equal(halfway["out.w"], resumed["out.w"])


def test_launch_runs_a_command_on_n_ranks_and_passes_its_exit_code(tmp_path):
    mpiexec()  # skip or fail as the other multi-process tests do
    ok = subprocess.run(_gradgen("launch", "-n", 2, "ops"), capture_output=True, text=True, timeout=TIMEOUT)
    assert ok.returncode == 0 and ok.stdout.count("allreduce_start") == 2
    bad = subprocess.run(_gradgen("launch", "-n", 2, "show", tmp_path / "missing.json"), capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert bad.returncode != 0 and "no such program file" in bad.stderr


BARE = {
    "raise": "ValueError: rank one fails before its first run",
    "caught": "no_such_var",
    "shape": "FeedError: feed 'image' has shape [",  # its own error: the type check comes first
    "batch": "DistributedError: the ranks were fed different shapes of 'image'",
}
"""bare_worker mode -> what the failing rank's error line must say."""


BARE_RUNS = [(mode, 2) for mode in BARE] + [("shape", 4)]
"""Every mode on two ranks; on four the one whose error depends on the rank count (each run is 3-4 s of
processes starting)."""


@pytest.mark.parametrize("mode,n", BARE_RUNS)
def test_without_init_parallel_a_failing_rank_still_ends_every_rank_with_its_error(mode, n):
    begin = time.monotonic()
    result = run_ranks(n, sys.executable, "-m", "tests.distributed.bare_worker", mode, timeout=60)
    assert time.monotonic() - begin < 60
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"gradgen: rank 1 of {n}: error: ")]
    assert lines and BARE[mode] in lines[0], result.stderr[-3000:]
    if mode == "shape":
        assert f"[{32 // n}, 1, 8, 7], but image: float64[-1, 1, 8, 8] is declared" in lines[0]


def test_ranks_fed_unequal_batches_name_every_ranks_shape():
    result = run_ranks(2, sys.executable, "-m", "tests.distributed.bare_worker", "batch", timeout=60)
    assert "(rank 0: [16, 1, 8, 8], rank 1: [15, 1, 8, 8])" in result.stderr
    assert "gradgen: rank 0 of 2: error: DistributedError" in result.stderr  # every rank stops, not only rank 1


def test_launch_names_the_rank_that_was_killed(tmp_path):
    """SIGKILL rank 1 of a long gradgen run under ``gradgen launch``: the job ends, and launch says it was rank 1."""
    main, startup, loss, batch, feeds = save_case("mlp-sgd", tmp_path)
    made = run_ranks(1, *_gradgen("data-parallel", tmp_path / "main.json", "--startup", tmp_path / "startup.json",
                                  "-o", tmp_path / "dp.json", "--startup-output", tmp_path / "dp_startup.json"))
    assert made.returncode == 0, made.stderr
    mpiexec()
    pids = tmp_path / "tmp"
    pids.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_LOCAL"))}
    env.update(TMPDIR=str(pids), PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    job = subprocess.Popen(_gradgen("launch", "-n", 2, "run", tmp_path / "dp.json", "--startup",
                                    tmp_path / "dp_startup.json", *feeds, "--shard", "--fetch", "loss",
                                    "--steps", 10 ** 7), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, cwd=ROOT, start_new_session=True)  # its own group: the finally ends it all
    try:
        deadline = time.monotonic() + TIMEOUT
        victim = None
        while victim is None and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.2)
            victim = next((int(p.name) for p in pids.glob("gradgen-ranks-*/*") if p.read_text() == "1"), None)
        assert victim is not None, "rank 1 never recorded its pid"
        time.sleep(1.0)  # into the training loop
        os.kill(victim, signal.SIGKILL)
        out, err = job.communicate(timeout=60)
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)  # launch, mpiexec and the ranks, should any still run
        except ProcessLookupError:
            pass
        job.communicate()
    assert job.returncode != 0
    assert f"gradgen launch: rank 1 (pid {victim} on " in err, err[-3000:]
    assert "signal 9 (SIGKILL)" in err
