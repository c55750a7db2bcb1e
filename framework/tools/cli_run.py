"""The ``gradgen`` commands that run programs: ``example`` (train a built-in model) and ``run`` (a program file),
with the options and helpers they share with the other commands (a program, its startup and parameters; the
backend; a progress bar)."""
from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .cli_feeds import program_feeds
from .cli_files import load_program as _load
from .cli_files import open_program
from .cli_values import CliError, brief_array, count, describe_array, parse_names, positive, save_arrays
from .cli_values import program_var as _var

if TYPE_CHECKING:
    from gradgen.program import Program

    from ..runtime.executor import Executor
    from ..runtime.scope import Scope

__all__ = ["add_commands", "backend_option", "check_values", "prepare", "Prepared", "progress", "runtime_options"]

PROFILE_STEPS = 40
"""``--profile`` lists this many of the slowest block-0 steps (with the steps nested in them)."""

LOG_LINES = 10
"""``gradgen run --steps N`` prints the fetched values this many times during the run unless ``--log-every`` says."""


def progress(steps: int, enabled: bool, unit: str = "step"):
    """A progress bar over ``range(steps)`` on stderr (none unless ``enabled`` and stderr is a terminal)."""
    from tqdm import tqdm

    # disable=None: no bar when stderr is not a terminal, so logs get no stream of carriage-return updates
    return tqdm(range(steps), disable=None if enabled else True, unit=unit, dynamic_ncols=True, file=sys.stderr)


def cmd_example(args) -> int:
    from .. import Executor, Scope
    from .examples import EXAMPLES
    from ..io import save_params

    if args.list or args.name is None:
        for name, build in EXAMPLES.items():
            print(f"{name:<8} {build().description}")
        return 0
    if args.name not in EXAMPLES:
        raise CliError(f"unknown example '{args.name}' (known: {', '.join(EXAMPLES)})")
    ex = EXAMPLES[args.name]()
    print(f"# {ex.name}: {ex.description}\n")
    print("## forward program\n")
    print(ex.main)
    from gradgen.program import program_guard

    with program_guard(ex.main, ex.startup):
        ex.make_optimizer().minimize(ex.loss)
    print("## after append_backward and the optimizer (generated ops name the forward op they came from)\n")
    print(ex.main)
    exe, scope = Executor(profile=args.profile, backend=args.backend, threads=args.threads), Scope()
    exe.run(ex.startup, scope=scope)
    steps = ex.steps if args.steps is None else args.steps
    first = last = None
    bar = progress(steps, not args.quiet)
    for step in bar:
        (loss,) = exe.run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
        last = float(loss)
        first = last if first is None else first
        if step % 10 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{last:.6g}")
    bar.close()
    if steps:
        print(f"loss: {first:.6g} at step 1 -> {last:.6g} at step {steps}")
    if args.profile:
        _print_profile(exe, ex.main)
    out = args.out or f"gradgen-{ex.name}"
    os.makedirs(out, exist_ok=True)
    ex.main.save(os.path.join(out, "main.json"))
    ex.startup.save(os.path.join(out, "startup.json"))
    save_params(os.path.join(out, "params.npz"), ex.main, scope)
    for name, value in ex.feed.items():
        np.save(os.path.join(out, f"{name}.npy"), value)
    print(f"wrote {out}/main.json, startup.json, params.npz and " + ", ".join(f"{n}.npy" for n in ex.feed))
    return 0


def _print_profile(exe, program) -> None:
    from .profile_text import profile_text

    print(profile_text(program, exe.profile(program), top=PROFILE_STEPS), end="")


class Prepared(NamedTuple):
    """A program ready to run: its executor and scope (startup run, parameters loaded)."""

    program: "Program"
    executor: "Executor"
    scope: "Scope"
    fetches: tuple[str, ...]
    """What an inference model folder fetches (empty for a program file)."""


def prepare(args) -> Prepared:
    """Load the program (a file or an inference model folder), run ``--startup`` and load ``--params``; without
    either, load the parameters gradgen wrote with the program (an inference folder's, or import-onnx's
    ``NAME.params.npz`` beside ``NAME.json``)."""
    from .. import Executor, Scope
    from ..io import load_params

    files = open_program(args.program)
    exe, scope = Executor(profile=getattr(args, "profile", False), backend=getattr(args, "backend", None),
                          threads=getattr(args, "threads", None)), Scope()
    if args.startup:
        exe.run(_load(args.startup), scope=scope)
    params = args.params or (None if args.startup else files.params)
    if params:
        if not os.path.exists(params):
            raise CliError(f"no such parameter file: {params}")
        load_params(params, files.program, scope, strict=False)
    return Prepared(files.program, exe, scope, files.fetches)


def check_values(program: "Program", scope: "Scope", feed: dict) -> None:
    """A CliError, with command-line advice, when the program reads a persistable var that neither the scope
    nor the feeds hold (the executor's own error would say what to call in Python)."""
    from ..passes.prune import required_inputs

    _, persistables = required_inputs(program.global_block())
    missing = [n for n in persistables if n not in scope and n not in feed]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise CliError(f"the program reads {shown}, with no value given: give --params FILE.npz (what "
                       "--save-params, save_inference_model or import-onnx wrote) or --startup FILE.json (the startup "
                       "program that initializes them)")


def cmd_run(args) -> int:
    from ..runtime.communicator import Solo, abort_on_error, communicator, launched_size

    # Under mpiexec this is one rank of several: a failure here must end them all, or they wait forever.
    comm = communicator() if launched_size() > 1 else Solo()
    with abort_on_error(comm):
        return _run(args, comm)


def _shard_axes(items: list[str]) -> dict[str, int]:
    """``["seq=1"]`` -> ``{"seq": 1}``."""
    axes = {}
    for item in items:
        name, _, axis = item.partition("=")
        if not name.strip() or not axis.strip().lstrip("-").isdigit():
            raise CliError(f"--shard-axis must look like NAME=AXIS (an integer), got {item!r}")
        axes[name.strip()] = int(axis)
    return axes


def _log_every(args) -> int:
    """Steps between the lines ``run`` prints during a run: ``--log-every``, else about ``LOG_LINES`` a run."""
    if args.log_every is not None:
        return args.log_every
    return math.ceil(args.steps / LOG_LINES) if args.steps > 1 else 0


def _show_step(bar, done: int, steps: int, every: int, fetch: list[str], values) -> None:
    """After step ``done`` of ``steps``: the first fetched number beside the bar, and every ``every`` steps a line
    of all the fetched values (not after the last step: the values of that one print in full after the run)."""
    first = next(((n, v) for n, v in zip(fetch, values) if np.size(v) == 1), None)
    if first is not None:
        bar.set_postfix_str(f"{first[0]} {brief_array(first[1])}", refresh=False)
    if every and done % every == 0 and done < steps:
        bar.write(f"step {done}/{steps}: " + ", ".join(f"{n} {brief_array(v)}" for n, v in zip(fetch, values)),
                  file=sys.stdout)


def _run(args, comm) -> int:
    from ..distributed import save_params_on_rank0, shard_feed
    from ..passes.prune import prune
    from .memory import analyze_memory, measured_run, memory_text

    if args.steps < 1:
        raise CliError(f"--steps must be at least 1 (got {args.steps})")
    program, exe, scope, named_fetches = prepare(args)
    feed = program_feeds(program, args.feed, args.cast)
    if args.shard or args.shard_axis:
        feed = shard_feed(feed, comm, _shard_axes(args.shard_axis))
    fetch = parse_names(args.fetch) or list(named_fetches)
    if not fetch:
        raise CliError("give --fetch: the vars to print, comma-separated (an inference model folder names its own)")
    for name in fetch:
        _var(program, name, "fetched var")
    if args.steps == 1 and not args.save_params and not args.memory:
        # Only the fetched values outlive this run, so only the ops they need run: fetching a prediction of a
        # training program then needs no labels (and updates nothing, which no-one could have seen anyway).
        # The memory report is about the whole program as written, so it turns this off.
        program = prune(program, fetch, feeds=list(feed))
    check_values(program, scope, feed)
    speaks = comm.rank == 0  # only rank 0 prints and writes files
    values, measured = [], {}
    every = _log_every(args)
    bar = progress(args.steps, args.steps > 1 and speaks)
    for step in bar:
        if step == 0 and args.memory and speaks:  # a loop's history is as long as this run's trip count
            values, measured = measured_run(exe, program, feed, fetch, scope)
        else:
            values = exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
        if speaks and args.steps > 1:
            _show_step(bar, step + 1, args.steps, every, fetch, values)
    bar.close()
    if args.memory and speaks:
        report = analyze_memory(program, {k: v.shape for k, v in feed.items()}, fetch, measured=measured)
        print(memory_text(report), end="")
    for name, value in zip(fetch, values if speaks else ()):
        print(f"{name}: {describe_array(value)}")
    if args.save and speaks:
        paths = save_arrays(args.save, list(zip(fetch, values)))
        print(f"wrote {', '.join(paths)}")
    if args.profile and speaks:
        _print_profile(exe, program)
    if args.save_params:
        written = save_params_on_rank0(args.save_params, program, scope, comm)
        if speaks:
            print(f"wrote {args.save_params} ({len(written)} vars)")
    return 0


def backend_option(p, help: str | None = None, auto: bool = False) -> None:
    """``--backend NAME``: the engine that runs (or, with ``show``, lowers) the program; ``auto`` (for commands
    that run it) lets the executor choose by measurement."""
    from ..backend import AUTO, BACKENDS, DEFAULT_BACKEND

    p.add_argument("--backend", choices=list(BACKENDS) + ([AUTO] if auto else []),
                   default=None if auto else DEFAULT_BACKEND,
                   help=help or "the engine that runs the program (default: auto where a compiled backend is "
                                "installed, else numpy; xla needs gradgen[xla]; auto runs numpy while the compiled "
                                "engines (xla, torch) prepare, then each in turn, then the fastest; --profile says "
                                "which)")
    if auto:
        p.add_argument("--threads", type=positive, metavar="N",
                       help="threads for the engine's pools (numpy: its BLAS products; torch: its intra-op threads; "
                            "xla: its CPU pool, made once per process; default: the cores other work leaves free, "
                            "at most what OPENBLAS_NUM_THREADS allows)")


def runtime_options(p) -> None:
    """A program to run (a file, or an inference model folder), with its feeds, startup program and parameters."""
    p.add_argument("program", help="a program file (.json), or a folder save_inference_model wrote")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy|NAME=FILE.npz|FILE.npz",
                   help="a feed: one array, the archive's array NAME (or its only one), or every array of the "
                        "archive by its name (repeatable)")
    p.add_argument("--cast", action="store_true",
                   help="convert a feed to its var's declared dtype (float64 data into a float32 program): floats "
                        "round to a narrower float; any other conversion only when no value changes")
    p.add_argument("--startup", help="a startup program to run first (initializes parameters)")
    p.add_argument("--params", help="a parameter file (.npz) to load (default, without --startup: the one gradgen "
                   "wrote with the program: an inference folder's, or NAME.params.npz beside NAME.json as "
                   "import-onnx writes)")


def add_commands(sub) -> None:
    """``example`` and ``run``."""
    p = sub.add_parser("example", help="train a built-in example model (the main job)")
    p.add_argument("name", nargs="?", help="the model: see --list")
    p.add_argument("--list", action="store_true", help="list the built-in models")
    p.add_argument("--steps", type=count, help="training steps (default: the model's own)")
    p.add_argument("--out", help="directory for the program and parameter files (default: ./gradgen-NAME)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", action="store_true", help="after training, print where a step's time went")
    backend_option(p, auto=True)
    p.set_defaults(run=cmd_example)

    p = sub.add_parser("run", help="run a program file (or inference model folder) and print fetched values "
                       "(one run with no --save-params runs only the ops the fetches need)")
    runtime_options(p)
    p.add_argument("--fetch", help="comma-separated vars to fetch (default: the ones an inference model folder names)")
    p.add_argument("--steps", type=count, default=1, help="run this many times (e.g. training steps)")
    p.add_argument("--log-every", type=count, metavar="K", help=f"with --steps: print the fetched values every K "
                   f"steps (default: {LOG_LINES} times a run; 0: only after the run)")
    backend_option(p, auto=True)
    p.add_argument("--save-params", help="write the persistable vars to this .npz after the run")
    p.add_argument("--save", metavar="DIR", help="write each fetched value to DIR as NAME.npy (characters a file "
                   "name cannot hold, such as '/', %%-escaped)")
    p.add_argument("--memory", action="store_true",
                   help="first print the bytes live after each op and the peak (of the whole program: no pruning)")
    p.add_argument("--profile", action="store_true",
                   help="after the runs, print where their time went: by op type, by op (with its source line), "
                        "and outside the ops (means per run)")
    p.add_argument("--shard", action="store_true",
                   help="under mpiexec: each rank takes its equal part of every feed along axis 0 (0-d feeds whole)")
    p.add_argument("--shard-axis", action="append", default=[], metavar="NAME=AXIS",
                   help="shard this feed along AXIS instead of 0 (repeatable; implies --shard)")
    p.set_defaults(run=cmd_run)
