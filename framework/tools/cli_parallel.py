"""The ``gradgen`` commands for training on many processes: ``data-parallel`` and ``launch``."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from .cli_files import load_program as _load
from .cli_values import CliError

__all__ = ["add_commands", "cmd_data_parallel", "cmd_launch"]


def cmd_data_parallel(args) -> int:
    from ..passes.data_parallel import data_parallel

    program = _load(args.program)
    startup = _load(args.startup) if args.startup else None
    if bool(args.startup) != bool(args.startup_output):
        raise CliError("give --startup and --startup-output together (the startup program gets the broadcast)")
    buckets = data_parallel(program, startup, bucket_bytes=int(args.bucket_mb * 2 ** 20), average=not args.sum)
    program.save(args.output)
    if startup is not None:
        startup.save(args.startup_output)
    for b in buckets:
        print(f"{b.buffer}: {b.nbytes} bytes, started at op #{b.start}, waited at op #{b.wait}: {', '.join(b.grads)}")
    print(f"wrote {args.output}" + (f" and {args.startup_output}" if startup is not None else ""))
    return 0


def _mpiexec(given: str | None) -> str:
    """The mpiexec to use: the one given, the one installed beside this Python (the mpich wheel's), or PATH's."""
    if given:
        return given
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        raise CliError("no mpiexec found beside this Python or on PATH: pip install 'gradgen[mpi]'")
    return found


def cmd_launch(args) -> int:
    command = args.command_args[1:] if args.command_args[:1] == ["--"] else args.command_args
    if args.n < 1 or not command:
        raise CliError("usage: gradgen launch -n N COMMAND [ARGS...], e.g. gradgen launch -n 4 run train.json ...")
    argv = [_mpiexec(args.mpiexec), "-n", str(args.n), sys.executable, "-m", "gradgen.framework", *command]
    return _run_naming_the_dead(argv)


def _run_naming_the_dead(argv: list[str]) -> int:
    """Run mpiexec, passing its output through; if it reports a process dead, say which rank that was.

    mpiexec's own output (its banner) goes to stdout, which is read here
    line by line; the ranks' stderr is left alone.
    """
    from ..runtime.rank_pids import RANK_PIDS_ENV, dead_ranks, describe_dead

    with tempfile.TemporaryDirectory(prefix="gradgen-ranks-") as where:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**os.environ, RANK_PIDS_ENV: where})
        seen = []
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            seen.append(line)
        code = process.wait()
        for dead in dead_ranks("".join(seen), where):
            print(f"gradgen launch: {describe_dead(*dead)}", file=sys.stderr)
    return code


def add_commands(sub) -> None:
    """Add ``data-parallel`` and ``launch`` to the CLI's subcommand parsers ``sub``."""
    p = sub.add_parser("data-parallel", help="insert the gradient all-reduce (and the startup broadcast) for "
                       "training on many ranks")
    p.add_argument("program")
    p.add_argument("-o", "--output", required=True, help="where to write the data-parallel program")
    p.add_argument("--startup", help="the startup program, to get a broadcast of rank 0's initial values")
    p.add_argument("--startup-output", help="where to write the startup program with its broadcast")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="gradient bucket size in MiB (default 25)")
    p.add_argument("--sum", action="store_true", help="the loss sums over the batch: add the ranks' gradients "
                   "without dividing by their number")
    p.set_defaults(run=cmd_data_parallel)

    p = sub.add_parser("launch", help="run a gradgen command on N processes with mpiexec")
    p.add_argument("-n", type=int, required=True, help="number of processes (ranks)")
    p.add_argument("--mpiexec", help="the mpiexec to use (default: the one beside this Python, else PATH's)")
    p.add_argument("command_args", nargs=argparse.REMAINDER, metavar="COMMAND ...")
    p.set_defaults(run=cmd_launch)
