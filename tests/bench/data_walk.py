"""How far one ``Executor.run`` wanders through gradgen's files: the issue-31 figure (files, stays, returns).

A run of the seed MLP's SGD step (its first run: the plan or compile included, and a steady one) is traced
with ``sys.setprofile``. Each call into a ``gradgen.framework`` source file (the executor, runtime and
backends; the IR's own accessors in ``gradgen.program`` are not counted) that is not the file of its caller
starts a *stay* in that file; a stay in a file the run has already stayed in is also a *return*. The counts
say how often following ``Executor.run``'s program through the code means opening another file, and going
back to one already read:

    python -m tests.bench.data_walk            # every installed engine
    python -m tests.bench.data_walk numpy xla
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from typing import NamedTuple

from .steps import make_step

__all__ = ["Walk", "walk"]


class Walk(NamedTuple):
    files: int
    stays: int
    returns: int
    per_file: dict


def _roots() -> tuple[str, ...]:
    import gradgen.framework

    return (os.path.dirname(gradgen.framework.__file__) + os.sep,)


def _step(backend: str):
    """The bench's seed MLP step (``steps.make_step``) on ``backend``."""
    return make_step("gradgen" if backend == "numpy" else f"gradgen@{backend}", "seed-f32")


def walk(backend: str, steady: bool = False) -> Walk:
    """The walk of one run of the seed step on ``backend`` (its first run, or with ``steady`` its third)."""
    run = _step(backend)
    if steady:
        run(), run()
    roots = _roots()
    stack: list[str | None] = []
    visited: Counter = Counter()
    stays = returns = 0

    def profile(frame, event, arg):
        nonlocal stays, returns
        if event == "call":
            path = frame.f_code.co_filename
            mine = path if path.startswith(roots) else None
            caller = next((p for p in reversed(stack) if p is not None), None)
            if mine is not None and mine != caller:
                stays += 1
                returns += visited[mine] > 0
                visited[mine] += 1
            stack.append(mine)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    short = {os.path.relpath(p, roots[0]): n for p, n in visited.items()}
    return Walk(len(visited), stays, returns, dict(sorted(short.items())))


def main(argv: list[str]) -> int:
    from gradgen.framework import backends

    names = argv or backends()
    for name in names:
        for steady in (False, True):
            w = walk(name, steady)
            print(f"{name:6s} {'steady' if steady else 'first '} run: {w.files} files, {w.stays} stays, "
                  f"{w.returns} returns")
        print("   ", ", ".join(f"{p} {n}" for p, n in walk(name).per_file.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
