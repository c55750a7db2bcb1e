"""``backend="auto"``'s choices kept between processes, as FFTW keeps its wisdom and jax its compiled executables:
which engine a trial (``trial.py``) chose for a program, feed and fetch names and feed shapes on this machine, so
that the next process running the same program prepares that engine first (before its first run when it prepared
quickly: the record keeps how long it took), runs on it as soon as it is ready, and weighs it against the runner-up
only in the later checks.

Why: a trial costs the program its first seconds. Its runs go to numpy while every candidate prepares (the
preparations share the interpreter lock and the cores with them), then to each engine in turn, the slower ones
included: on the anchors' transformer block the first ten steps took 0.5 s each against 0.11 on the torch engine
it then chose, and a training script run again pays that again. A remembered choice is still checked against its
runner-up (``Trial``'s checks, the first one sooner than after a trial), and what a check finds replaces the
record, so a choice made on a busy afternoon does not stand for good.

A record is keyed by a digest of everything the choice depends on: the program (its ops, attributes and vars, not
its source lines), the names and shapes of the feed and fetches, the engines in the trial and their packages'
versions, gradgen's own code (``_code_stamp``: a checkout edited or moved to another commit keeps its version
number, and a record made under its old code, a bug's choice among them, would stand), the thread setting, and
the machine (its CPU model and core count). It is a small JSON file under
``choices/`` in gradgen's cache folder (``GRADGEN_CACHE_DIR``, default ``~/.cache/gradgen``), read with ``json``
only; a record that is unreadable or names an engine not in the trial is ignored. ``GRADGEN_REMEMBER_CHOICES=0``
turns this off (the test suite does: each test's trial must be its own).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Mapping, Sequence

from ...program.serialize import program_to_dict
from ..backend import BACKENDS
from ..backend.shared.cache_root import cache_root

__all__ = ["REMEMBER_ENV", "Remembered", "choices_dir", "enabled", "recall", "remember", "trial_key"]

REMEMBER_ENV = "GRADGEN_REMEMBER_CHOICES"
"""Set to ``0`` to make every process weigh the engines afresh."""

_FORMAT = 1


@dataclass(frozen=True)
class Remembered:
    """One program's choice as a trial or a check left it."""

    chosen: str
    runner_up: str | None
    medians: dict[str, float]
    """Seconds per run: the trial's (or the last check's) median of each engine it timed."""
    apart: bool
    """Whether the choice's times were apart from the runner-up's (else a close call: a check switches it by
    medians alone)."""
    reason: str
    when: float
    """When it was recorded (seconds since the epoch)."""
    prepare_seconds: float | None = None
    """How long the chosen engine's preparation (import, trace, compile) should take in a later process: what it
    took in the process that recorded it, less the compiles a persistent cache keeps (XLA's), None when unknown
    (numpy, or a record made before this was kept): the next process waits for a preparation this short before
    its first run (``trial_rules.RECALLED_WAIT_SECONDS``)."""

    def says(self) -> str:
        """The reason a choice taken from this record gives."""
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.when))
        return f"remembered from a run at {stamp} ({choices_dir()}): {self.reason}"


def enabled() -> bool:
    """Whether choices are recalled and recorded (``REMEMBER_ENV``)."""
    return os.environ.get(REMEMBER_ENV, "1") != "0"


def choices_dir() -> str:
    """The folder of the records."""
    return os.path.join(cache_root(), "choices")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""gradgen's own folder (this file is ``framework/runtime/remembered.py`` in it)."""


@functools.cache
def _code_stamp(root: str = _PACKAGE_ROOT) -> str:
    """A digest of the path, size and modification time of each of gradgen's Python files under ``root``, its tests
    left out: any edit, checkout or reinstall gives another (300 files stat'ed in 2.3 ms, once a process)."""
    digest = hashlib.blake2b(digest_size=16)
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in ("tests", "__pycache__") and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{os.path.relpath(path, root)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


@functools.cache
def _setting(engines: tuple[str, ...]) -> dict:
    """What a choice among ``engines`` depends on besides the program, the same all process long (read once:
    the package versions alone took 6 ms, and every new feed shape makes a trial): the versions of gradgen,
    numpy and the packages the engines run on, gradgen's code, and the machine."""
    needs = [BACKENDS[name][0] for name in engines if name in BACKENDS and BACKENDS[name][0]]
    return {"engines": list(engines), "versions": [(package, _version(package)) for package in
                                                   ("gradgen", "numpy", *needs)], "code": _code_stamp(),
            "machine": [platform.machine(), _cpu_model(), os.cpu_count()]}


def trial_key(program, feed_shapes: Mapping[str, tuple], fetch_names: Sequence[str], engines: Sequence[str],
              threads: int | None) -> str:
    """The digest a record of this trial is filed under."""
    described = program_to_dict(program)
    for block in described["blocks"]:
        for op in block["ops"]:
            op.pop("callsite", None)  # (an edit elsewhere in the script moves every line)
    facts = {"program": described, "feed": sorted((name, list(shape)) for name, shape in feed_shapes.items()),
             "fetch": list(fetch_names), **_setting(tuple(sorted(engines))), "threads": threads, "format": _FORMAT}
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _path(key: str) -> str:
    return os.path.join(choices_dir(), f"{key}.json")


def _seconds_or_none(value) -> float | None:
    """A record's duration: a finite number of seconds, at least 0, or None (anything else makes it unreadable)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a duration: {value!r}")
    seconds = float(value)
    if not 0.0 <= seconds < float("inf"):
        raise ValueError(f"not a duration: {value!r}")
    return seconds


def recall(key: str, engines: Sequence[str]) -> Remembered | None:
    """The record filed under ``key`` when it names engines among ``engines``; None when there is none, or it is
    unreadable or stale."""
    try:
        with open(_path(key), encoding="utf-8") as file:
            data = json.load(file)
        found = Remembered(chosen=str(data["chosen"]), runner_up=data["runner_up"] and str(data["runner_up"]),
                           medians={str(k): float(v) for k, v in dict(data["medians"]).items()},
                           apart=bool(data["apart"]), reason=str(data["reason"]), when=float(data["when"]),
                           prepare_seconds=_seconds_or_none(data.get("prepare_seconds")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    known = set(engines)
    if found.chosen not in known or (found.runner_up is not None and found.runner_up not in known):
        return None
    if any(name not in found.medians for name in (found.chosen, found.runner_up) if name is not None):
        return None
    return found


def remember(key: str, record: Remembered) -> None:
    """File ``record`` under ``key`` (whole or not at all: written aside, then renamed); a cache folder that
    cannot be written leaves the choice unrecorded, nothing else."""
    folder = choices_dir()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".record-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(asdict(record), file)
            os.replace(temporary, _path(key))
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return
