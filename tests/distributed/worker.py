"""What each rank runs in the multi-process tests: ``mpiexec -n N python -m tests.distributed.worker MODE OUT``.

Modes:
- ``train``: every case of ``cases.CASES`` and ``cases.CONTRAST`` on this rank's shards; rank 0 checks
  that every rank ends with bit-identical values and writes them to OUT/CASE.npz.
- ``train_xla``: ``cases.XLA_CASES`` on the xla backend (``Executor(backend="xla")``).
- ``broadcast``: each rank's startup fills a parameter with its own rank; after
  the startup's broadcast, rank 0 writes what every rank holds to OUT/broadcast.npz.
- ``raise``: rank 1 raises while rank 0 waits in an all-reduce that can never finish.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from gradgen.framework import Executor, Scope, data_parallel, init_parallel, optimizer
from gradgen.program import Program, layers, program_guard
from gradgen.program.initializer import Constant

from .cases import CASES, CONTRAST, XLA_CASES, build, train


def _train(comm, out: str, backend: str = "numpy", cases=None) -> None:
    for case in cases or CASES + CONTRAST:
        values = train(case, parallel=True, comm=comm, backend=backend)
        everyone = comm.comm.gather(values, root=0)
        if comm.rank == 0:
            same = all(np.array_equal(v[k], everyone[0][k]) for v in everyone for k in v)
            np.savez(os.path.join(out, f"{case}.npz"), **values, **{"@identical": np.array(same)})


def _broadcast(comm, out: str) -> None:
    main, startup = Program(), Program()
    with program_guard(main, startup):
        w = layers.create_parameter([3], "float64", name="w", initializer=Constant(comm.rank + 7.0))  # rank's own
        x = layers.data("x", [-1, 3], "float64")
        optimizer.SGD(0.1).minimize(layers.reduce_sum(x * w))
    data_parallel(main, startup)
    scope = Scope()
    Executor().run(startup, scope=scope)
    held = comm.comm.gather(np.array(scope["w"]), root=0)
    if comm.rank == 0:
        np.savez(os.path.join(out, "broadcast.npz"), held=np.stack(held))


def _raise(comm, out: str) -> None:
    if comm.rank == 1:
        raise ValueError("rank one fails on purpose")
    main, startup, loss, model = build("mlp-sgd", parallel=True)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)  # its broadcast waits for rank 1, which never comes
    exe.run(main, feed=model.data(0), fetch_list=[loss], scope=scope)


def _train_xla(comm, out: str) -> None:
    """``train`` on the xla backend: the all-reduces and broadcasts are ordered host callbacks there."""
    _train(comm, out, "xla", XLA_CASES)


MODES = {"train": _train, "train_xla": _train_xla, "broadcast": _broadcast, "raise": _raise}


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    comm = init_parallel()
    MODES[mode](comm, out)
