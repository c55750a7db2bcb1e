"""A block's later shapes compile behind (``backend/xla/runner.py``): a run of shapes new to a compiled block goes
to the numpy reference while XLA compiles them in a background thread, and the runs after that compile are XLA's.
The background threads here are held until the test lets them run, so every test knows which engine ran what."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


class _Held:
    """A stand-in for ``threading.Thread`` whose target runs only when the test calls ``let_run`` or someone
    ``join``s it (the runner joins the thread that makes its reference before using the reference)."""

    made: list["_Held"] = []

    def __init__(self, target, name=None, daemon=None):
        self.target, self.name, self.ran = target, name, False
        _Held.made.append(self)

    def start(self) -> None:
        pass

    def let_run(self) -> None:
        if not self.ran:
            self.ran = True
            self.target()

    join = let_run

    def is_alive(self) -> bool:
        return not self.ran


@pytest.fixture
def held(monkeypatch):
    """The compile-behind threads made so far (the runner's ``threading.Thread`` is ``_Held``)."""
    need_jax()
    import types

    from gradgen.framework.backend.xla import runner

    _Held.made = []
    monkeypatch.setattr(runner, "threading", types.SimpleNamespace(Thread=_Held, Lock=threading.Lock))
    monkeypatch.setattr(runner, "COMPILE_BEHIND", True)
    monkeypatch.setattr(runner, "RENT_BEFORE_COMPILE", 0.0)  # each new shape compiles behind after its first run
    return lambda: [t for t in _Held.made if t.name == "gradgen-xla-compile-behind"]


def _classifier(dropout: bool = False):
    main, startup = Program(), Program()
    startup.random_seed = 3
    with program_guard(main, startup):
        x = layers.data("x", [-1, 5], "float64")
        y = layers.data("y", [-1, 1], "int64")
        h = layers.fc(x, 8, act="tanh")
        if dropout:
            h = layers.dropout(h, 0.25, seed=5)
        loss = layers.reduce_mean(layers.softmax_with_cross_entropy(layers.fc(h, 3), y))
        optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss


def _feed(n: int, seed: int, classes: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 5)), "y": rng.integers(0, classes, (n, 1))}


def _xla_compiles(exe: Executor, main) -> int:
    (entry,) = exe._runner._compiled.entries(main).values()
    return entry.compiled.compiles


def _numpy_run(sizes) -> tuple[list, np.ndarray]:
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="numpy"), Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(sizes)]
    return losses, scope["fc_0.w_0"]


def test_a_later_shape_runs_on_the_reference_until_its_background_compile_is_done(held):
    from gradgen.framework.backend.xla import compile as xla_compile

    seen = []
    compile_ = xla_compile.jax.stages.Lowered.compile
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    sizes = (16, 5, 16, 5, 16, 5)
    losses = [exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(sizes[:2])]
    assert _xla_compiles(exe, main) == 1  # batch 5 ran on the reference; its compile waits in the background
    (behind,) = held()
    assert not behind.ran
    losses += [exe.run(main, feed=_feed(n, k + 2), fetch_list=[loss], scope=scope)[0]
               for k, n in enumerate(sizes[2:4])]
    assert _xla_compiles(exe, main) == 1 and len(held()) == 1  # still compiling: one compile, not a second
    built = exe.plans_built
    try:
        xla_compile.jax.stages.Lowered.compile = lambda self, options=None, **kw: seen.append(options) or compile_(
            self, options, **kw)
        behind.let_run()
    finally:
        xla_compile.jax.stages.Lowered.compile = compile_
    assert seen == [xla_compile.QUICK_COMPILE]  # a later shape's compile, at XLA's cheapest options
    losses += [exe.run(main, feed=_feed(n, k + 4), fetch_list=[loss], scope=scope)[0]
               for k, n in enumerate(sizes[4:])]
    assert _xla_compiles(exe, main) == 2 and len(held()) == 1  # batch 5 ran on its executable
    assert exe.plans_built - built == 1  # the background compile is counted once, by the next run
    want_losses, want_w = _numpy_run(sizes)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(scope["fc_0.w_0"], want_w, rtol=1e-12)


def test_a_new_shape_stays_on_the_reference_until_its_runs_have_cost_a_compile(held, monkeypatch):
    from gradgen.framework.backend.xla import runner

    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(16, 0), fetch_list=[loss], scope=scope)
    (entry,) = exe._runner._compiled.entries(main).values()
    assert entry.compiled.compiles == 1 and entry.compiled.compile_seconds > 0
    monkeypatch.setattr(runner, "RENT_BEFORE_COMPILE", 1e9)  # a compile dearer than any number of runs here
    sizes = (16, 5, 16, 5, 5)
    losses = [exe.run(main, feed=_feed(n, k + 1), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(sizes)]
    assert held() == [] and _xla_compiles(exe, main) == 1  # batch 5 ran three times on the reference
    (rent,) = entry.rent.values()
    assert rent > 0
    monkeypatch.setattr(runner, "RENT_BEFORE_COMPILE", rent / (entry.compiled.compile_seconds * 2))
    losses.append(exe.run(main, feed=_feed(5, 6), fetch_list=[loss], scope=scope)[0])  # the rent now passes
    (behind,) = held()
    behind.let_run()
    losses.append(exe.run(main, feed=_feed(5, 7), fetch_list=[loss], scope=scope)[0])
    assert _xla_compiles(exe, main) == 2
    want_losses, want_w = _numpy_run((16,) + sizes + (5, 5))
    np.testing.assert_allclose(losses, want_losses[1:], rtol=1e-12)
    np.testing.assert_allclose(scope["fc_0.w_0"], want_w, rtol=1e-12)


def test_a_block_keeps_the_rent_of_the_last_new_shapes_only(held, monkeypatch):
    from gradgen.framework.backend.xla import runner

    monkeypatch.setattr(runner, "RENT_BEFORE_COMPILE", 1e9)
    monkeypatch.setattr(runner, "RENT_KEPT", 2)
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    for k, n in enumerate((16, 5, 6, 5, 7)):
        exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)
    (entry,) = exe._runner._compiled.entries(main).values()
    assert [key[0][0][0] for key in entry.rent] == [5, 7]  # batch 6's rent dropped: met before 5's second run
    assert held() == [] and _xla_compiles(exe, main) == 1


def test_a_reference_run_that_fails_leaves_the_scope_as_it_was(held):
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(16, 0), fetch_list=[loss], scope=scope)
    before = {name: np.array(scope[name]) for name in ("fc_0.w_0", "fc_1.w_0")}
    with pytest.raises(ExecutionError, match="softmax_with_cross_entropy"):
        exe.run(main, feed=_feed(5, 1, classes=7), fetch_list=[loss], scope=scope)  # labels past the 3 classes
    for name, value in before.items():
        np.testing.assert_array_equal(scope[name], value)


def test_a_block_that_draws_at_random_compiles_each_shape_in_its_run(held):
    main, startup, loss = _classifier(dropout=True)
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(16, 0), fetch_list=[loss], scope=scope)
    exe.run(main, feed=_feed(5, 1), fetch_list=[loss], scope=scope)
    assert _xla_compiles(exe, main) == 2 and held() == []


def test_with_compile_behind_off_each_shape_compiles_in_its_run(held, monkeypatch):
    from gradgen.framework.backend.xla import runner

    monkeypatch.setattr(runner, "COMPILE_BEHIND", False)
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    for k, n in enumerate((16, 5)):
        exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)
    assert _xla_compiles(exe, main) == 2 and held() == []


def test_a_failed_background_compile_leaves_its_shape_to_compile_in_its_run(held, monkeypatch):
    from gradgen.framework.backend.xla import compile as xla_compile

    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(16, 0), fetch_list=[loss], scope=scope)
    exe.run(main, feed=_feed(5, 1), fetch_list=[loss], scope=scope)
    (behind,) = held()
    executable = xla_compile.CompiledBlock.executable

    def failing(self, *args, **kwargs):
        raise MemoryError("no room to compile")

    monkeypatch.setattr(xla_compile.CompiledBlock, "executable", failing)
    behind.let_run()
    monkeypatch.setattr(xla_compile.CompiledBlock, "executable", executable)
    exe.run(main, feed=_feed(5, 2), fetch_list=[loss], scope=scope)
    assert _xla_compiles(exe, main) == 2 and len(held()) == 1  # compiled in the run, no second try behind


def test_a_block_compiled_in_pieces_compiles_a_later_shape_behind(held, monkeypatch):
    from gradgen.framework.backend.xla import pieces

    monkeypatch.setattr(pieces, "PIECE_OPS", 6)
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    sizes = (16, 5, 5)
    losses = [exe.run(main, feed=_feed(n, k), fetch_list=[loss], scope=scope)[0] for k, n in enumerate(sizes[:2])]
    (entry,) = exe._runner._compiled.entries(main).values()
    assert isinstance(entry.compiled, pieces.PiecewiseBlock)
    one_shape = entry.compiled.compiles
    assert one_shape > 1 and entry.compiled.compile_seconds_per_shape == entry.compiled.compile_seconds  # (the rent's)
    held()[0].let_run()
    losses.append(exe.run(main, feed=_feed(5, 2), fetch_list=[loss], scope=scope)[0])
    assert entry.compiled.compiles == 2 * one_shape  # every piece compiled the second shape, behind
    want_losses, want_w = _numpy_run(sizes)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(scope["fc_0.w_0"], want_w, rtol=1e-12)


def test_the_default_executor_never_compiles_behind():
    """``backend="auto"``'s trial times the engine it names, so its xla runner has no reference to hand runs to."""
    need_jax()
    exe = Executor(backend="auto")
    assert exe._runner.runners["xla"].made()._make_reference is None


@pytest.mark.parametrize("persisted", [True, False])
def test_prepare_says_how_long_it_compiled_what_a_persistent_cache_keeps(monkeypatch, persisted):
    """``backend="auto"`` records a preparation less what it returns (``Remembered.prepare_seconds``)."""
    need_jax()
    from gradgen.framework.backend.xla import runner

    monkeypatch.setattr(runner, "persists_compiles", lambda: persisted)
    main, startup, loss = _classifier()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    kept = exe._runner.prepare(main, _feed(16, 0), [loss.name], scope)
    (entry,) = exe._runner._compiled.entries(main).values()
    assert entry.compiled.compiles == 1
    assert kept == (entry.compiled.compile_seconds if persisted else 0.0) and (kept > 0) == persisted
