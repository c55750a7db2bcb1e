"""Does the default ``Executor()`` pick the faster engine? Fresh processes per case, each checked in place
(issue 32: "0 wrong picks over 10 fresh processes for each of the six cases").

    python -m tests.bench.choice                       # 10 processes for each of the six cases
    python -m tests.bench.choice --cases lenet,rnn --processes 3
    python -m tests.bench.choice --cases seed-f64 --rule TRIAL_SECONDS=4.0   # a trial rule set otherwise

Each process builds the case's training step (the bench's seed MLPs, the anchors' LeNet, ResNet blocks,
transformer block and RNN, as ``engine_steps`` builds them), runs the default executor until it has chosen
(``backend_choice``) and on for ``--steady`` seconds more (a choice made while the engines' times still overlapped
is checked again after 2 s of runs: ``trial_rules.RECHECK_SECONDS_OVERLAPPING``), then times every engine ``auto``
weighs for the program with executors of their own, in rounds of a few steps each (50 ms at least), after untimed
ones, in the same process (so the same load hits every engine), and reports the medians. A pick is wrong when
the engine the default runs in steady state (its choice after those seconds) has a median more than ``MARGIN``
above the fastest's; the table shows the first choice too. Each process makes its own trial: no choice
remembered from an earlier one (``runtime/remembered.py``) is used or recorded. Time with the machine otherwise
quiet.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from gradgen.framework.runtime.trial_rules import BLOCK_RUNS, BLOCK_SECONDS, full_block

__all__ = ["CASES", "MARGIN", "main", "probe"]

CASES = ("seed-f32", "seed-f64", "lenet", "resnet", "transformer", "rnn")
SETTLE_SECONDS = 0.25
"""Untimed run time before each engine's timed steps: the engine before it leaves its pool's threads spinning (a
torch-engine LeNet step took 7.1 ms right after numpy steps and 3.9 alone; OpenBLAS's threads spin ~0.1 s)."""
MARGIN = 0.10
"""How much slower than the fastest engine a pick may be and still count as right: closer than that, timing noise
decides, and either engine is as good."""

_NOT_PASSED = ("GRADGEN_BACKEND", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
"""Not passed to the processes: the default engine is under test, and the OpenBLAS variables some machines set pin
numpy's BLAS to older kernels than a user's machine would run (the anchors' ``run.sh`` unsets them too)."""

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ANCHORS = os.path.join(os.path.dirname(_ROOT), "shared", "anchors", "workloads")


def _step_and_executor(case: str, backend: str | None, folder: str):
    """(one training step as a function, its executor, its program, its feed) of ``case`` on ``backend`` (None: the
    default)."""
    from . import engine_steps, steps

    if case.startswith("seed-"):
        main_program, startup, loss, feed, values = steps.mlp_program(*steps.case_data(case))
    else:
        main_program, startup, loss, feed, values = engine_steps._program(case, folder)
    exe, scope = engine_steps._initialized(startup, values, backend)
    return (lambda: float(exe.run(main_program, feed=feed, fetch_list=[loss], scope=scope)[0])), exe, main_program, feed


def probe(case: str, folder: str, budget_s: float, rounds: int, steady_s: float = 0.0) -> dict:
    """One process's pick for ``case`` (first, and after ``steady_s`` more seconds of runs) and the engines' medians
    measured after it (seconds per step)."""
    from gradgen.framework.backend import NOT_BY_DEFAULT, WEIGHED_FOR, backends, feed_batch

    step, exe, program, feed = _step_and_executor(case, None, folder)
    start, runs = time.perf_counter(), 0
    while exe.backend_choice(program) is None and time.perf_counter() - start < budget_s:
        step()
        runs += 1
    choice = exe.backend_choice(program)
    seconds_to_choose = time.perf_counter() - start if choice else None
    until = time.perf_counter() + steady_s
    while choice is not None and time.perf_counter() < until:
        step()
    steady = exe.backend_choice(program)
    batch = feed_batch(feed)
    weighed = [name for name in backends() if name not in NOT_BY_DEFAULT
               and (name not in WEIGHED_FOR or not WEIGHED_FOR[name](program.global_block(), batch))]
    engines = {name: _step_and_executor(case, name, folder)[0] for name in weighed}
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, fn in engines.items():
            settle = time.perf_counter() + SETTLE_SECONDS
            fn()  # untimed, for SETTLE_SECONDS: the engine before it leaves its pool's threads spinning a while
            while time.perf_counter() < settle:
                fn()
            # a whole block as the trial's (full_block): three sub-millisecond seed steps a round, 21 an engine, gave
            # verdicts against the check made just before in the same process (a check met numpy at 0.328 ms and
            # xla at 0.426, apart; the bench's rounds then numpy 0.74, xla 0.53)
            timed, spent = 0, 0.0
            while not full_block(timed, spent):
                t = time.perf_counter()
                fn()
                took = time.perf_counter() - t
                times[name].append(took)
                timed, spent = timed + 1, spent + took
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    return {"case": case, "first": choice[0] if choice else None, "chosen": steady[0] if steady else None,
            "why": steady[1] if steady else None, "runs_to_choose": runs, "seconds_to_choose": seconds_to_choose,
            "medians": medians}


def _verdict(row: dict) -> str:
    medians, chosen = row["medians"], row["chosen"]
    if chosen is None:
        return "no choice"
    fastest = min(medians.values())
    return "wrong" if medians[chosen] > (1 + MARGIN) * fastest else "right"


def _rule(given: str) -> tuple[str, object]:
    """``NAME=JSON`` as (NAME, the JSON's value), NAME one of the trial's rules."""
    from gradgen.framework.runtime import trial_rules

    name, _, value = given.partition("=")
    try:
        if name in trial_rules.__all__:
            return name, json.loads(value)
    except json.JSONDecodeError:
        pass
    raise SystemExit(f"--rule {given!r}: want NAME=JSON with NAME in runtime/trial_rules.py's __all__")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds a process may take to choose")
    parser.add_argument("--rounds", type=int, default=7,
                        help=f"rounds of {BLOCK_RUNS} timed steps or more ({BLOCK_SECONDS:g} s) per engine")
    parser.add_argument("--steady", type=float, default=6.0,
                        help="seconds the default runs on after its first choice before the choice is read again")
    parser.add_argument("--anchors", default=_ANCHORS, help="the anchors' workloads folder (wl.py)")
    parser.add_argument("--rule", action="append", default=[], metavar="NAME=JSON",
                        help="set a trial rule (runtime/trial_rules.py) in every process, its value as JSON, to "
                             "weigh a setting: --rule TRIAL_SECONDS=4.0")
    args = parser.parse_args(argv)
    setting = "".join(f"trial_rules.{name} = {value!r}; " for name, value in map(_rule, args.rule))
    print("| case | process | first choice | steady choice | medians (ms) | verdict | runs to choose |")
    print("|---|---:|---|---|---|---|---:|")
    wrong = total = 0
    reasons = []
    for case in args.cases.split(","):
        for k in range(args.processes):
            call = f"probe({case!r}, {args.anchors!r}, {args.budget}, {args.rounds}, {args.steady})"
            code = (f"import json; from gradgen.framework.runtime import trial_rules; {setting}"
                    f"from tests.bench.choice import probe; print(json.dumps({call}))")
            env = {key: value for key, value in os.environ.items() if key not in _NOT_PASSED}
            env["GRADGEN_REMEMBER_CHOICES"] = "0"  # (each process's own trial is under test, not an earlier's record)
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_ROOT, env=env,
                                  timeout=args.budget + 600)
            if done.returncode:
                print(f"| {case} | {k} | failed: {done.stderr.strip().splitlines()[-1]} | | | | |", flush=True)
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            verdict = _verdict(row)
            wrong += verdict != "right"
            if verdict != "right":
                reasons.append(f"{case} {k}: {row['why']}")
            total += 1
            shown = ", ".join(f"{n} {v * 1e3:.2f}" for n, v in sorted(row["medians"].items()))
            print(f"| {case} | {k} | {row['first']} | {row['chosen']} | {shown} | {verdict} | "
                  f"{row['runs_to_choose']} |", flush=True)
    print(f"\n{wrong} wrong or missing picks in {total} processes")
    for reason in reasons:  # the default's own account of each: what its trial measured
        print(f"- {reason}")


if __name__ == "__main__":
    main()
