"""Which rank a PID was: how ``gradgen launch`` names the rank that mpiexec saw die.

A rank killed by a signal (SIGKILL, the out-of-memory killer) cannot report
anything, and MPICH's launcher then kills the other ranks at once (with
SIGKILL: they cannot report either) and prints only the dead process's PID:

    =   PID 26332 RUNNING AT vm
    =   EXIT CODE: 9

``gradgen launch`` gives its ranks a directory in ``GRADGEN_RANK_PIDS``;
each rank, when gradgen's executor loads, writes a file named by its PID
that holds its rank (``record_rank``). After the job, ``launch`` reads the
PIDs of mpiexec's banner back as ranks (``dead_ranks``). A process that
mpiexec started without ``launch`` records nothing.
"""
from __future__ import annotations

import os
import re
import signal

__all__ = ["RANK_PIDS_ENV", "record_rank", "dead_ranks", "describe_dead"]

RANK_PIDS_ENV = "GRADGEN_RANK_PIDS"
"""The directory, set by ``gradgen launch``, where each rank records its PID."""

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")
"""Environment variables through which mpiexec (MPICH's Hydra, Open MPI) tells a process its rank."""

_BANNER = re.compile(r"PID (\d+) RUNNING AT (\S+)\s*=?\s*EXIT CODE: (\d+)")
"""MPICH's "BAD TERMINATION" banner: the dead process's PID, its host and its exit code (the signal's number
when a signal ended it)."""


def record_rank() -> None:
    """Write this process's rank under its PID in ``GRADGEN_RANK_PIDS``, when ``launch`` set it."""
    where = os.environ.get(RANK_PIDS_ENV)
    rank = next((os.environ[v] for v in _RANK_VARS if os.environ.get(v, "").isdigit()), None)
    if where and rank is not None and os.path.isdir(where):
        with open(os.path.join(where, str(os.getpid())), "w") as f:
            f.write(rank)


def dead_ranks(output: str, where: str) -> list[tuple[int | None, int, str, int]]:
    """(rank or None, pid, host, exit code) of each process mpiexec's ``output`` reports dead."""
    found = []
    for pid, host, code in _BANNER.findall(output):
        try:
            with open(os.path.join(where, pid)) as f:
                rank = int(f.read())
        except (OSError, ValueError):
            rank = None
        found.append((rank, int(pid), host, int(code)))
    return found


def describe_dead(rank: int | None, pid: int, host: str, code: int) -> str:
    """One line naming a dead rank and how it ended."""
    who = f"rank {rank}" if rank is not None else "a process that recorded no rank"
    try:
        how = f"was ended by signal {code} ({signal.Signals(code).name}) and could not report an error"
    except ValueError:
        how = f"exited with code {code}"
    return f"{who} (pid {pid} on {host}) {how}; mpiexec then ended the other ranks"
