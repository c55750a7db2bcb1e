"""The training runs the data-parallel tests compare: every example with every optimizer, in float64.

``build(case)`` makes fresh programs with the optimizer applied; ``train``
runs them for a number of steps on a batch per step, fed whole or sharded.
The worker (run under mpiexec) and the tests (the one-process reference)
share these, so both sides train exactly the same model on the same data.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gradgen.framework import Executor, Scope, data_parallel, optimizer, shard_feed
from gradgen.framework.tools.examples.cnn import bar_images, cnn
from gradgen.framework.tools.examples.mlp import mlp, mlp_data
from gradgen.framework.tools.examples.rnn import rnn, sine_windows
from gradgen.program import program_guard

STEPS = 20


class Model(NamedTuple):
    build: object
    data: object
    """seed -> one whole batch."""
    axes: dict
    """The batch axis of each feed that is not on axis 0."""
    average: bool
    """True for a loss that is a mean over the batch."""
    rates: dict
    """Optimizer name -> learning rate."""


MODELS = {
    "mlp": Model(mlp, mlp_data, {}, False, {"sgd": 1e-6, "momentum": 1e-6, "adam": 1e-2}),
    "cnn": Model(lambda: cnn(dtype="float64"), lambda seed: bar_images(seed=seed, dtype="float64"), {}, True,
                 {"sgd": 0.1, "momentum": 0.05, "adam": 0.01}),
    "rnn": Model(rnn, lambda seed: sine_windows(seed=seed), {"seq": 1}, True,
                 {"sgd": 0.1, "momentum": 0.05, "adam": 0.02}),
}

OPTIMIZERS = {"sgd": optimizer.SGD, "momentum": optimizer.Momentum, "adam": optimizer.Adam}

CASES = [f"{m}-{o}" for m in MODELS for o in OPTIMIZERS] + ["mlp-momentum-clip", "cnn-adam-clip"]
"""``model-optimizer`` runs, and two with gradient clipping by global norm tight enough to act at every step."""

XLA_CASES = ["mlp-sgd", "rnn-momentum", "cnn-adam-clip"]
"""The cases the xla backend trains on two ranks: each model's gradients all-reduced, the clipping's global norm,
and each kind of optimizer state. What xla adds is how its compiled step runs the collectives (ordered host
callbacks, which jax's persistent cache does not keep: every run compiles afresh); the other model-optimizer
pairs differ in element-wise updates only, and every case runs data parallel on numpy. All eleven took 33 s of
the suite on a 2-core AMD EPYC."""

CLIP = {"mlp": 10.0, "cnn": 0.05}

CONTRAST = ["cnn-adam-clip-local"]
"""A run that must NOT match one process: clipping each rank's own gradients by their local norm, then reducing.
It shows the clipping cases can tell a global norm from a local one."""


def build(case: str, parallel: bool, bucket_bytes: int = 4096):
    """(main, startup, loss, model) for ``case``; with ``parallel``, after the data-parallel pass."""
    model_name, opt_name, *clip = case.split("-")
    model = MODELS[model_name]
    ex = model.build()
    kw = {"grad_clip": CLIP[model_name]} if clip else {}
    with program_guard(ex.main, ex.startup):
        OPTIMIZERS[opt_name](model.rates[opt_name], **kw).minimize(ex.loss)
    if parallel:
        clip_ops = [op for op in ex.main.global_block().ops if op.type == "clip_by_global_norm"]
        local = clip_ops[0].output("Out") if "local" in clip else None  # reduce what each rank clipped alone
        data_parallel(ex.main, ex.startup, bucket_bytes=bucket_bytes, average=model.average, grads=local)
    return ex.main, ex.startup, ex.loss, model


def save_case(case: str, where) -> tuple:
    """Write ``case``'s programs (no pass) and batch 0 as files for ``gradgen``; return (main, startup, loss,
    batch, the ``--feed`` arguments)."""
    main, startup, loss, model = build(case, parallel=False)
    main.save(where / "main.json")
    startup.save(where / "startup.json")
    batch = model.data(0)
    for name, value in batch.items():
        np.save(where / f"{name}.npy", value)
    return main, startup, loss, batch, [f"--feed={n}={where / n}.npy" for n in batch]


def persistables(program, scope) -> dict[str, np.ndarray]:
    return {v.name: np.array(scope[v.name]) for v in program.global_block().vars.values() if v.persistable}


def train(case: str, parallel: bool, steps: int = STEPS, comm=None, backend: str = "numpy") -> dict[str, np.ndarray]:
    """Train ``case`` for ``steps`` steps (batch k made with seed k) on ``backend``; return every persistable
    value."""
    main, startup, loss, model = build(case, parallel)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    for step in range(steps):
        batch = model.data(step)
        feed = shard_feed(batch, comm, model.axes) if parallel else batch
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    return persistables(main, scope)
