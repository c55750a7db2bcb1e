"""Starting multi-process runs from a test: find MPI, or skip only where CI does not require it."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 120
"""Seconds any multi-process run may take before the test fails (a hang is a failure, never a wait forever)."""


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's) or on PATH; skips, or fails under GRADGEN_REQUIRE_EXTRAS."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if found is None or importlib.util.find_spec("mpi4py") is None:
        why = "mpi4py and an mpiexec are needed: pip install -e '.[mpi]'"
        if os.environ.get("GRADGEN_REQUIRE_EXTRAS"):
            pytest.fail(f"GRADGEN_REQUIRE_EXTRAS is set but {why}")
        pytest.skip(why)
    return found


def run_ranks(n: int, *argv: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """``mpiexec -n n argv...`` from the repository's root, with output captured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_LOCAL"))}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    job = subprocess.Popen([mpiexec(), "-n", str(n), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env=env)
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.terminate()  # SIGTERM: mpiexec ends its ranks (SIGKILL would leave them running, orphaned)
        try:
            job.communicate(timeout=10)
        finally:
            job.kill()
        raise
    return subprocess.CompletedProcess(job.args, job.returncode, out, err)
