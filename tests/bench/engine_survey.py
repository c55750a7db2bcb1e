"""Time one gradgen training step on each candidate engine (issue 22): ``python -m tests.bench.engine_survey``.

Run from the repository root, with gradgen importable (``PYTHONPATH=.../.gg`` in a worktree):

    python -m tests.bench.engine_survey [--quick] [--folder ../shared/anchors/workloads] [--json out.json]
                                        [--workloads seed,lenet,...] [--engines numpy,xla,...]

What it measures: the median wall time of one whole training step (forward, backward, optimizer update, the loss
back on the host) of the anchors' LeNet, ResNet blocks, transformer block and RNN and of the bench's seed MLP (and
large MLP, left out by ``--quick``), on gradgen's numpy and xla backends, JAX jit of the same graph written by hand
(the anchors' ``setup_jax``), and the gradgen program exported to ONNX and run by ONNX Runtime, OpenVINO and IREE
(``engine_steps`` says how). Each engine runs in a process of its own; they are timed in rounds, one engine at a
time, the order rotating each round, so load from other processes hits all alike. Before timing, each engine's
first 5 losses must equal gradgen numpy's (float32, rtol 1e-4): a fast wrong engine does not count. An engine that
cannot run a workload is reported with its exact error. The result is a markdown table (ms per step, and the ratio
to JAX), the time to the first loss, the errors, and the load average before and after.

ONNX Runtime is the system python's; OpenVINO and IREE are measurement-only packages, never gradgen dependencies,
each in a venv of its own that sees the system packages (gradgen, onnx, numpy):

    python -m venv /tmp/ov-venv --system-site-packages && /tmp/ov-venv/bin/pip install openvino
    python -m venv /tmp/iree-venv --system-site-packages && /tmp/iree-venv/bin/pip install iree-base-compiler iree-base-runtime

An engine whose python is missing is reported as not installed. Threads: ONNX Runtime's intra-op pool, OpenVINO's
``INFERENCE_NUM_THREADS`` and IREE's task topology get ``--threads`` (2); numpy's BLAS and XLA use the machine's cores.

Cost: the engines of one workload set up at once (so the time-to-first-loss table includes their contention), then
timing takes at most ``--budget-s`` per workload past the first 3 rounds. ``--quick`` leaves out the large MLP and
IREE and times 3 short rounds. On the loaded 2-core machine this was written on (load average 6 to 10), ``--quick``
took 3 to 6 minutes; a quiet machine is what the figures are for.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .engine_steps import ENGINES, WORKLOADS, make_engine_step

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FOLDER = str(ROOT.parent / "shared" / "anchors" / "workloads")
PYTHONS = {"openvino": "/tmp/ov-venv/bin/python", "iree": "/tmp/iree-venv/bin/python"}
"""Engines that run in a venv of their own -> that venv's python (the others run in this python)."""
CHECKED_STEPS, RTOL = 5, 1e-4
MIN_ROUNDS = 3
"""Rounds timed even past ``--budget-s`` (a slow engine still gets at least one step a round)."""
READY_TIMEOUT_S = 600.0
SLOW_TO_COMPILE = ("iree",)
"""Engines ``--quick`` leaves out: IREE's compiles of the ResNet step took a minute on a loaded 2-core machine."""


# ----------------------------------------------------------------------------------- worker (one engine, one process)
def _version(engine: str) -> str:
    module = {"numpy": "numpy", "xla": "jax", "jax": "jax", "ort": "onnxruntime", "openvino": "openvino",
              "iree": "iree.runtime"}[engine]
    try:
        from importlib.metadata import version
        label = version({"iree.runtime": "iree-base-runtime"}.get(module, module))
    except Exception:  # noqa: BLE001 - a version is only a label
        return "?"
    if engine == "ort":   # the session options are left at their defaults: say what the level is
        import onnxruntime as ort
        label += f" ({ort.SessionOptions().graph_optimization_level.name} by default)"
    return label


def _say(kind: str, payload) -> None:
    print(f"{kind} {json.dumps(payload)}", flush=True)


def worker(engine: str, workload: str, folder: str, threads: int, warmup: int) -> None:
    """Make the step, run the checked steps and the warm-up, say READY (or FAILED), then time ``T n`` requests."""
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="engine-survey-") as workdir:
            step = make_engine_step(engine, workload, folder, threads, workdir)
            setup_s = time.perf_counter() - start
            losses = [step() for _ in range(CHECKED_STEPS)]
            first_loss_s = time.perf_counter() - start
            for _ in range(warmup):
                step()
            t = time.perf_counter()
            step()
            _say("READY", {"losses": losses, "setup_s": setup_s, "first_loss_s": first_loss_s,
                           "estimate_s": time.perf_counter() - t, "version": _version(engine)})
            for line in sys.stdin:
                words = line.split()
                if not words or words[0] == "quit":
                    break
                times = []
                for _ in range(int(words[1])):
                    t = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - t)
                _say("T", times)
    except Exception as e:  # noqa: BLE001 - the exact error is the survey's finding
        _say("FAILED", {"error": f"{type(e).__name__}: {e}"})


# ----------------------------------------------------------------------------------- driver
class _Worker:
    """One engine's process: started, asked for READY, then for timed steps."""

    def __init__(self, engine: str, workload: str, args):
        python = PYTHONS.get(engine, sys.executable)
        self.engine, self.proc, self.info = engine, None, {}
        if not os.path.exists(python):
            self.info = {"error": f"not installed: {python} is missing (see this script's docstring)"}
            return
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [python, "-m", "tests.bench.engine_survey", "--worker", engine, workload, "--folder", args.folder,
             "--threads", str(args.threads), "--warmup", str(args.warmup)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, bufsize=1)

    def _reply(self, timeout: float) -> tuple[str, object]:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stderr.seek(0)
            tail = self.stderr.read().strip().splitlines()[-3:]
            return "FAILED", {"error": "worker " + ("timed out" if not ready else "died") + ": " + " | ".join(tail)}
        kind, _, payload = line.partition(" ")
        return kind, json.loads(payload)

    def wait_ready(self, deadline: float) -> None:
        if self.proc is None:
            return
        kind, self.info = self._reply(max(1.0, deadline - time.monotonic()))
        if kind != "READY":
            self.close()

    def time_steps(self, n: int) -> list[float]:
        self.proc.stdin.write(f"T {n}\n")
        kind, times = self._reply(READY_TIMEOUT_S)
        if kind != "T":
            raise RuntimeError(f"{self.engine}: {times}")
        return times

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _wrong_losses(losses: list[float], reference: list[float] | None) -> str | None:
    if reference is None:
        return None
    bad = [i for i, (a, b) in enumerate(zip(losses, reference)) if abs(a - b) > RTOL * abs(b)]
    return f"losses {losses} differ from gradgen numpy's {reference} (rtol {RTOL})" if bad else None


def survey_workload(workload: str, args) -> dict:
    """{engine: {ms, first_loss_s, version} or {error}} for one workload: all engines set up at once, then timed in
    rounds with the order rotating."""
    workers = [_Worker(e, workload, args) for e in args.engines]
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for w in workers:
            w.wait_ready(deadline)
        reference = next((w.info.get("losses") for w in workers if w.engine == "numpy"), None)
        for w in workers:
            wrong = "losses" in w.info and _wrong_losses(w.info["losses"], reference)
            if wrong:
                w.info = {"error": f"wrong answer: {wrong}"}
                w.close()
        live = [w for w in workers if w.proc is not None]
        times: dict[str, list[float]] = {w.engine: [] for w in live}
        stop = time.monotonic() + args.budget_s
        for r in range(args.rounds):
            if r >= MIN_ROUNDS and time.monotonic() > stop:
                break
            for w in live[r % len(live):] + live[:r % len(live)] if live else []:
                n = max(1, round(args.round_s / max(w.info["estimate_s"], 1e-6)))
                times[w.engine] += w.time_steps(n)
        for w in live:
            w.info["ms"] = 1e3 * statistics.median(times[w.engine])
            w.info["steps_timed"] = len(times[w.engine])
        return {w.engine: w.info for w in workers}
    finally:
        for w in workers:
            w.close()


def _cell(info: dict, jax_ms: float | None) -> str:
    if "ms" not in info:
        error = info.get("error", "")
        return "wrong loss" if error.startswith("wrong") else "not installed" if error.startswith("not") else "fails"
    ratio = f" ({info['ms'] / jax_ms:.2f}x)" if jax_ms else ""
    return f"{info['ms']:.2f}{ratio}"


def markdown(results: dict, engines: list[str], load: tuple, loaded_note: str) -> str:
    """The survey's tables: ms per step (ratio to JAX jit), seconds to the first loss, and the errors."""
    head = "| workload | " + " | ".join(engines) + " |\n|---|" + "---|" * len(engines)
    rows, firsts, errors = [head], [head], []
    for workload, by_engine in results.items():
        jax_ms = by_engine.get("jax", {}).get("ms")
        rows.append(f"| {workload} | " + " | ".join(_cell(by_engine[e], jax_ms) for e in engines) + " |")
        firsts.append(f"| {workload} | " + " | ".join(
            f"{by_engine[e]['first_loss_s']:.1f}" if "first_loss_s" in by_engine[e] else "-" for e in engines) + " |")
        errors += [f"- {workload} on {e}: {by_engine[e]['error']}" for e in engines if "error" in by_engine[e]]
    versions = {e: info["version"] for by_engine in results.values() for e, info in by_engine.items() if "version" in info}
    return "\n".join([
        f"Engine survey {loaded_note}; load average before {load[0]}, after {load[1]}.",
        "Versions: " + ", ".join(f"{e} {v}" for e, v in versions.items()), "",
        "ms per training step, median (ratio to JAX jit):", "", *rows, "",
        f"Seconds from process start to the {CHECKED_STEPS}th loss (build, export, compile, {CHECKED_STEPS} steps):",
        "", *firsts, "", "Could not run:" if errors else "Every engine ran every workload.", *errors])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "WORKLOAD"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", default=DEFAULT_FOLDER, help="the anchors' workloads folder (holds wl.py)")
    ap.add_argument("--quick", action="store_true", help="no large MLP, no IREE, fewer and shorter rounds")
    ap.add_argument("--workloads", help=f"comma-separated, of {','.join(WORKLOADS)}")
    ap.add_argument("--engines", help=f"comma-separated, of {','.join(ENGINES)} (default all; quick: all but "
                    f"{','.join(SLOW_TO_COMPILE)}); numpy is the reference")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, help="steps after the checked ones, before timing (default 3, quick 1)")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--round-s", type=float, help="seconds of steps per engine per round (at least one step)")
    ap.add_argument("--budget-s", type=float, help=f"seconds of timing per workload, then no new round after "
                    f"the first {MIN_ROUNDS} (default 40, quick 12)")
    ap.add_argument("--note", default="", help="a label for the table, e.g. 'quiet machine'")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, args.folder, args.threads, args.warmup)
        return
    args.warmup = args.warmup if args.warmup is not None else 1 if args.quick else 3
    workloads = args.workloads.split(",") if args.workloads else [w for w in WORKLOADS if not (args.quick and w == "large")]
    args.engines = (args.engines or ",".join(e for e in ENGINES if not (args.quick and e in SLOW_TO_COMPILE))).split(",")
    args.rounds = args.rounds or (3 if args.quick else 7)
    args.budget_s = args.budget_s or (12.0 if args.quick else 40.0)
    args.round_s = args.round_s or (0.1 if args.quick else 0.4)
    before = os.getloadavg()
    start = time.monotonic()
    results = {}
    for workload in workloads:
        results[workload] = survey_workload(workload, args)
        print(f"{workload}: done at {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    load = (tuple(round(x, 2) for x in before), tuple(round(x, 2) for x in os.getloadavg()))
    note = (args.note + ", " if args.note else "") + f"{time.monotonic() - start:.0f} s"
    print(markdown(results, args.engines, load, f"({note})"))
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "results": results}, indent=1))


if __name__ == "__main__":
    main()
