"""The data-parallel command-line pieces in one process: ``gradgen data-parallel``, ``run --shard`` in a world of
one, and their errors. Runs on many ranks are in test_mpi.py."""
from __future__ import annotations

import subprocess
import sys

from gradgen.program import Program

from .cases import save_case
from .launch import ROOT


def gradgen(*args):
    return subprocess.run([sys.executable, "-m", "gradgen.framework", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def _files(tmp_path):
    return save_case("mlp-sgd", tmp_path)[-1]


def test_data_parallel_command_writes_both_programs_and_lists_the_buckets(tmp_path):
    _files(tmp_path)
    result = gradgen("data-parallel", tmp_path / "main.json", "--startup", tmp_path / "startup.json", "-o",
                     tmp_path / "dp.json", "--startup-output", tmp_path / "dp_startup.json", "--bucket-mb", "0.001",
                     "--sum")
    assert result.returncode == 0, result.stderr
    assert "allreduce@bucket_0: 8000 bytes" in result.stdout and "allreduce@bucket_1: 800000 bytes" in result.stdout
    dp, dp_startup = Program.load(tmp_path / "dp.json"), Program.load(tmp_path / "dp_startup.json")
    waits = [op for op in dp.global_block().ops if op.type == "allreduce_wait"]
    assert len(waits) == 2 and all(op.attr("average") is False for op in waits)
    assert dp_startup.global_block().ops[-1].type == "broadcast"


def test_data_parallel_command_errors(tmp_path):
    _files(tmp_path)
    result = gradgen("data-parallel", tmp_path / "main.json", "--startup", tmp_path / "startup.json", "-o",
                     tmp_path / "dp.json")
    assert result.returncode == 1 and "give --startup and --startup-output together" in result.stderr
    gradgen("data-parallel", tmp_path / "main.json", "-o", tmp_path / "dp.json")
    again = gradgen("data-parallel", tmp_path / "dp.json", "-o", tmp_path / "dp2.json")
    assert again.returncode == 1 and "data_parallel applies once" in again.stderr


def test_run_shard_in_one_process_trains_on_the_whole_batch(tmp_path):
    feeds = _files(tmp_path)
    gradgen("data-parallel", tmp_path / "main.json", "--startup", tmp_path / "startup.json", "-o",
            tmp_path / "dp.json", "--startup-output", tmp_path / "dp_startup.json", "--sum")
    plain = gradgen("run", tmp_path / "main.json", "--startup", tmp_path / "startup.json", *feeds, "--fetch", "loss")
    sharded = gradgen("run", tmp_path / "dp.json", "--startup", tmp_path / "dp_startup.json", *feeds, "--shard",
                      "--shard-axis", "y=0", "--fetch", "loss")
    assert plain.returncode == sharded.returncode == 0, sharded.stderr
    assert plain.stdout == sharded.stdout and plain.stdout.startswith("loss: float64[]")
    bad = gradgen("run", tmp_path / "dp.json", "--startup", tmp_path / "dp_startup.json", *feeds,
                  "--shard-axis", "y", "--fetch", "loss")
    assert bad.returncode == 1 and "--shard-axis must look like NAME=AXIS" in bad.stderr
