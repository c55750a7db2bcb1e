"""The GPU check's own test: its CPU mode runs end to end, and its GPU mode stops by name where there is no GPU.

``bash tests/gpu/check.sh --cpu`` goes down the same path as on a GPU (a process per system, the reference's
losses compared, the table), here for the smallest workload and two steps, so the script cannot rot unseen.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import require

ROOT = Path(__file__).resolve().parents[2]


def _need_engines() -> None:
    for module, extra in (("jax", "xla"), ("torch", "oracle")):
        require(None if importlib.util.find_spec(module) else module, f"pip install -e '.[{extra}]'")


def _jax_sees_a_gpu() -> bool:
    import jax
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def test_the_cpu_mode_runs_lenet_and_its_losses_match_the_reference():
    _need_engines()
    done = subprocess.run(["bash", "tests/gpu/check.sh", "--cpu", "--workloads", "lenet", "--steps", "1",
                           "--warmup", "1", "--check-steps", "2"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, PYTHON=sys.executable))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("| LeNet-5"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert all(float(cell) > 0 for cell in cells[1:4]), row  # gradgen, JAX and PyTorch each timed
    assert cells[6].startswith("ok ") and cells[7].count("ok ") == 2, row
    assert "PASSED" in done.stdout


def test_a_loss_that_differs_fails_the_check():
    """The comparison is not a formality: a gradgen loss off by more than the tolerance fails the row."""
    from tests.gpu import check

    reference = {"losses": [2.0, 1.5]}
    assert check._loss_cell({"losses": [2.0, 1.5 * (1 + 1e-3)]}, reference, 2e-4) == ("DIFFERS 1.0e-03", False)
    assert check._loss_cell({"losses": [2.0, 1.5 * (1 + 1e-5)]}, reference, 2e-4)[1]


def test_the_gpu_mode_without_a_gpu_stops_and_says_so():
    _need_engines()
    if _jax_sees_a_gpu():
        pytest.skip("this machine has a GPU: the check runs there for real")
    done = subprocess.run([sys.executable, "-m", "tests.gpu.check", "--workloads", "lenet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sees no GPU" in done.stderr and "does not fall back to the CPU" in done.stderr
    assert "| LeNet-5" not in done.stdout  # nothing ran on the CPU instead
    if shutil.which("nvidia-smi") is None:
        script = subprocess.run(["bash", "tests/gpu/check.sh"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60)
        assert script.returncode == 2 and "no NVIDIA driver" in script.stderr, script.stderr
