"""A data-parallel script that never calls ``init_parallel``, run as ``mpiexec -n N python -m
tests.distributed.bare_worker MODE``; rank 1 misbehaves in the way MODE names, at the third step:

- ``raise``: rank 1 raises before it has run anything (MPI is not even started on it);
- ``caught``: rank 1's run fails (a feed no var has) and the script catches the error and goes on;
- ``shape``: rank 1 is fed images one pixel narrower than the others' (its feed check fails on rank 1 alone);
- ``batch``: rank 1 is fed one row fewer than the others (every op would accept it).
"""
from __future__ import annotations

import os
import sys

from gradgen.framework import Executor, Scope, shard_feed

from .cases import build


def main(mode: str) -> None:
    rank = int(os.environ["PMI_RANK"])
    if mode == "raise" and rank == 1:
        raise ValueError("rank one fails before its first run")
    program, startup, loss, model = build("cnn-sgd", parallel=True)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for step in range(4):
        feed = shard_feed(model.data(step))
        if step == 2 and rank == 1:
            if mode == "caught":
                try:
                    exe.run(program, feed={**feed, "no_such_var": feed["image"]}, fetch_list=[loss], scope=scope)
                except Exception:  # noqa: BLE001 - the script swallows it: the other ranks must still not hang
                    continue
            elif mode == "shape":
                feed["image"] = feed["image"][..., :-1]
            elif mode == "batch":
                feed = {name: value[:-1] for name, value in feed.items()}
        exe.run(program, feed=feed, fetch_list=[loss], scope=scope)


if __name__ == "__main__":
    main(sys.argv[1])
