"""A block's later shapes (a partial last batch, another eval batch) compile with XLA's cheapest options and are
compiled again with the default ones once their runs outlast that compile; the numbers are the reference's either
way. A block whose trace states run-time checks lowers a later shape once, not twice. These follow a later shape
compiled in its run (on a GPU, in a block that draws at random, or with ``COMPILE_BEHIND`` off);
``test_xla_compile_behind.py`` follows it compiled in the background."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


def _classifier():
    """A softmax classifier: its cross-entropy states a run-time check (labels within the classes)."""
    main, startup = Program(), Program()
    startup.random_seed = 3
    with program_guard(main, startup):
        x = layers.data("x", [-1, 5], "float64")
        y = layers.data("y", [-1, 1], "int64")
        loss = layers.reduce_mean(layers.softmax_with_cross_entropy(layers.fc(layers.fc(x, 8, act="tanh"), 3), y))
        optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss


def _feed(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 5)), "y": rng.integers(0, 3, (n, 1))}


@pytest.fixture(autouse=True)
def compile_in_the_run(monkeypatch):
    need_jax()
    from gradgen.framework.backend.xla import runner

    monkeypatch.setattr(runner, "COMPILE_BEHIND", False)


@pytest.fixture
def compiles(monkeypatch):
    """The options of every XLA compile, in order (None: the defaults)."""
    need_jax()
    import jax.stages

    seen: list = []
    compile_ = jax.stages.Lowered.compile

    def recording_compile(self, compiler_options=None, **kw):
        seen.append(compiler_options)
        return compile_(self, compiler_options, **kw)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recording_compile)
    return seen


def _train(backend: str, sizes) -> tuple[list, np.ndarray, Executor]:
    main, startup, loss = _classifier()
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(sizes)]
    return losses, scope["fc_0.w_0"], exe


SIZES = (16, 16, 5, 16, 5, 16, 5, 5)


def test_a_later_shape_compiles_quickly_and_gives_the_references_numbers(compiles):
    from gradgen.framework.backend.xla.compile import QUICK_COMPILE

    losses, w, exe = _train("xla", SIZES)
    want_losses, want_w, _ = _train("numpy", SIZES)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(w, want_w, rtol=1e-12)
    assert compiles[-2:] == [None, QUICK_COMPILE]  # (the startup compiled first)


class _AtOnce:
    """A thread that runs its target when started: the background compile is done when ``start`` returns."""

    def __init__(self, target, name=None, daemon=None):
        self.target = target

    def start(self) -> None:
        self.target()


def test_a_quick_executable_is_compiled_again_once_its_runs_outlast_its_compile(compiles, monkeypatch):
    """The first call of the quick executable outlasts UPGRADE_AFTER (0) times its compile: a background compile
    with the default options starts, and the next call of that shape runs its result."""
    import threading
    import types

    from gradgen.framework.backend.xla import compile as xla_compile

    monkeypatch.setattr(xla_compile, "UPGRADE_AFTER", 0.0)
    monkeypatch.setattr(xla_compile, "threading", types.SimpleNamespace(Thread=_AtOnce, Lock=threading.Lock))
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    before, options_before = exe.plans_built, len(compiles)
    losses = [exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(SIZES)]
    assert compiles[options_before:] == [None, xla_compile.QUICK_COMPILE, None]
    assert exe.plans_built - before == 3  # the upgrade is a compile the profile counts, once swapped in
    entry = next(iter(exe._runner._compiled.entries(main).values()))
    assert all(found.quick is None and not found.upgrade for found in entry.compiled._executables.values())
    want_losses, want_w, _ = _train("numpy", SIZES)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(scope["fc_0.w_0"], want_w, rtol=1e-12)


def test_a_checked_block_lowers_a_later_shape_once(monkeypatch):
    need_jax()
    import jax

    lowerings = []
    jit = jax.jit

    def counting_jit(fun, *args, **kwargs):
        jitted = jit(fun, *args, **kwargs)
        lower = jitted.lower

        def counted(*a, **k):
            lowerings.append(kwargs.get("donate_argnums", ()))
            return lower(*a, **k)

        jitted.lower = counted
        return jitted

    from gradgen.framework.backend.xla import compile as xla_compile

    monkeypatch.setattr(xla_compile.jax, "jit", counting_jit)
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    lowerings.clear()
    exe.run(main, feed=_feed(16, 0), fetch_list=[loss], scope=scope)
    first = list(lowerings)
    lowerings.clear()
    exe.run(main, feed=_feed(5, 1), fetch_list=[loss], scope=scope)
    assert first == [(1,), ()]  # the first shape learns of the label check only from its trace
    assert lowerings == [()]
