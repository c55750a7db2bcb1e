"""How ``gradgen launch`` names a killed rank: the PID files the ranks write and MPICH's banner read back."""
from __future__ import annotations

import os

from gradgen.framework.runtime.rank_pids import RANK_PIDS_ENV, dead_ranks, describe_dead, record_rank

BANNER = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID {pid} RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
===================================================================================
"""


def test_a_rank_records_its_pid_and_the_banner_reads_back_as_its_rank(tmp_path, monkeypatch):
    monkeypatch.setenv(RANK_PIDS_ENV, str(tmp_path))
    monkeypatch.setenv("PMI_RANK", "3")
    record_rank()
    assert (tmp_path / str(os.getpid())).read_text() == "3"
    found = dead_ranks(BANNER.format(pid=os.getpid()) + BANNER.format(pid=1), str(tmp_path))
    assert found == [(3, os.getpid(), "vm", 9), (None, 1, "vm", 9)]
    assert describe_dead(*found[0]) == (f"rank 3 (pid {os.getpid()} on vm) was ended by signal 9 (SIGKILL) and could "
                                        "not report an error; mpiexec then ended the other ranks")
    assert describe_dead(*found[1]).startswith("a process that recorded no rank (pid 1 on vm)")


def test_without_launch_nothing_is_recorded(tmp_path, monkeypatch):
    monkeypatch.delenv(RANK_PIDS_ENV, raising=False)
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.chdir(tmp_path)
    record_rank()
    assert list(tmp_path.iterdir()) == []
    assert dead_ranks("no banner here", str(tmp_path)) == []
