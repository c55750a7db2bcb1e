"""The torch engine's generated walk (``backend/torch/walk.compile_walk``): the steps as Python functions over an env,
in chunks. Values cross chunks (a persistable read in one chunk and updated in another, an intermediate made in one
and dying in a later one), dead intermediates leave the env, var names that are not identifiers are only ever data,
and the errors name the op as the loop did."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope, append_backward, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.test_torch_backend import need_torch


def _deep_training(depth: int):
    """A chain of ``depth`` small layers trained with momentum: ~10 ops a layer forward and backward."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 6], "float64")
        h = x
        for i in range(depth):
            w = layers.create_parameter([6, 6], "float64", name=f"w{i}")
            h = layers.sigmoid(h @ w) * 2.0 - 0.5
        loss = layers.reduce_mean(layers.square(h))
        optimizer.Momentum(0.1, 0.9).apply_gradients(append_backward(loss))
    return main, startup, loss


def _trained(backend: str, main, startup, loss, steps: int = 3):
    rng = np.random.default_rng(0)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    for name in [v.name for v in main.global_block().all_parameters()]:
        scope.set(name, rng.standard_normal(scope[name].shape) * 0.5)
    feed = {"x": rng.standard_normal((5, 6))}
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(steps)]
    return losses, {name: np.array(scope[name]) for name in scope.keys()}


@pytest.mark.parametrize("chunk", [1, 3, 7, 256])
def test_a_deep_program_in_chunks_trains_as_numpy_does(monkeypatch, chunk):
    need_torch()
    from gradgen.framework.backend.torch import walk

    monkeypatch.setattr(walk, "CHUNK_STEPS", chunk)
    main, startup, loss = _deep_training(12)
    want_losses, want_scope = _trained("numpy", main, startup, loss)
    got_losses, got_scope = _trained("torch", main, startup, loss)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-12)
    assert sorted(got_scope) == sorted(want_scope)
    for name, want in want_scope.items():
        np.testing.assert_allclose(got_scope[name], want, rtol=1e-11, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("chunk", [1, 2, 256])
def test_the_env_keeps_only_what_lives_after_the_walk(monkeypatch, chunk):
    """After the walk the env holds the run's inputs that never die (persistables), the fetched values and the
    updated persistables: no intermediate of any chunk."""
    need_torch()
    import torch

    from gradgen.framework.backend.shared.signature import run_signature
    from gradgen.framework.backend.torch import walk

    monkeypatch.setattr(walk, "CHUNK_STEPS", chunk)
    main, startup, loss = _deep_training(3)
    block = main.global_block()
    sig = run_signature(block, ("x",), (loss.name,))
    steps = walk.build_steps(block, sig)
    scope = Scope()
    Executor(backend="numpy").run(startup, scope=scope)
    env = {"x": torch.ones(4, 6, dtype=torch.float64)}
    env.update((name, torch.from_numpy(np.array(scope[name]))) for name in sig.from_scope)
    with torch.inference_mode():
        walk.compile_walk(block, steps)(env)
    persistable = {name for name in env if block.var(name).persistable}
    assert set(env) == persistable | {loss.name}
    assert set(sig.commits) <= set(env)


def test_var_names_that_are_not_identifiers_stay_data():
    need_torch()
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x'); import os; os._exit(3) #\n", [-1, 3], "float64")
        y = layers.scale(x, scale=2.0)
        z = layers.add(y, x, name='z"\\n')
    feed = {x.name: np.arange(6.0).reshape(2, 3)}
    got = Executor(backend="torch").run(main, feed=feed, fetch_list=[z], scope=Scope())[0]
    np.testing.assert_array_equal(got, 3 * feed[x.name])


def _monkeypatched_kernel(monkeypatch, op_type: str, wrong):
    from gradgen.framework.backend.torch import walk

    made = walk.KERNELS[op_type]
    monkeypatch.setitem(walk.KERNELS, op_type, lambda op: wrong(made(op)))


def _scale_refused(monkeypatch, wrong, message: str) -> None:
    """A one-op program (scale) whose kernel ``wrong`` replaces is refused with an error matching ``message``."""
    need_torch()
    _monkeypatched_kernel(monkeypatch, "scale", wrong)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.scale(x, scale=2.0)
    with pytest.raises(ExecutionError, match=message):
        Executor(backend="torch").run(main, feed={"x": np.ones((2, 3))}, fetch_list=[y], scope=Scope())


def test_an_output_of_the_wrong_dtype_names_the_op_and_its_declared_type(monkeypatch):
    need_torch()
    import torch

    _scale_refused(monkeypatch, lambda run: lambda x: run(x).to(torch.float32),
                   r"op #0 \(scale\).*output '.*' is torch\.float32\[2, 3\], declared float64\[-1, 3\] "
                   r"\(torch kernel\)")


def test_an_output_of_the_wrong_fixed_dim_is_refused(monkeypatch):
    _scale_refused(monkeypatch, lambda run: lambda x: run(x)[:, :2],
                   r"\(scale\).*is torch\.float64\[2, 2\], declared float64\[-1, 3\]")


def test_a_failing_kernel_names_the_op_and_its_inputs(monkeypatch):
    def failing(run):
        def fn(x):
            raise ValueError("no such value")
        return fn

    _scale_refused(monkeypatch, failing,
                   r"op #0 \(scale\).* failed: ValueError: no such value; inputs: x: torch\.float64\[2, 3\]")


def test_a_kernel_returning_too_few_outputs_is_an_error_naming_the_op(monkeypatch):
    need_torch()
    _monkeypatched_kernel(monkeypatch, "top_k", lambda run: lambda *xs: run(*xs)[:1])
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 5], "float64")
        values, indices = layers.top_k(x, k=2)
    with pytest.raises(ExecutionError, match=r"\(top_k\).*returned 1 outputs for 2 output vars"):
        Executor(backend="torch").run(main, feed={"x": np.ones((2, 5))}, fetch_list=[values], scope=Scope())


@pytest.mark.parametrize("chunk", [1, 4, 256])
def test_a_kernel_failing_deep_in_a_chunk_is_named_by_its_op_index(monkeypatch, chunk):
    """The chunk's one handler finds the failing step by the line it was on: the op index and the inputs named
    are that step's, wherever it sits in its chunk."""
    need_torch()
    from gradgen.framework.backend.torch import walk

    monkeypatch.setattr(walk, "CHUNK_STEPS", chunk)

    def failing(run):
        def fn(x):
            raise ArithmeticError("this one")
        return fn

    _monkeypatched_kernel(monkeypatch, "square", failing)
    main, startup, loss = _deep_training(4)
    at = next(i for i, op in enumerate(main.global_block().ops) if op.type == "square")
    exe, scope = Executor(backend="torch"), Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(ExecutionError, match=rf"op #{at} \(square\).* failed: ArithmeticError: this one; inputs: "
                                             r".*: torch\.float64\[5, 6\]"):
        exe.run(main, feed={"x": np.ones((5, 6))}, fetch_list=[loss], scope=scope)


def test_steps_of_no_output_and_of_two_outputs_compile_and_run():
    """The generated line of a step whose kernel gives no value (the run signature leaves such a step out, but its
    source stays valid) and of one with two: each value counted and checked, both stored."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch import walk

    vector = (torch.float32, 1, ())
    steps = [walk.Step(lambda: (), (), (), (), (), (0,)),
             walk.Step(lambda: (torch.zeros(2), torch.ones(3)), (), ("a", "b"), (vector, vector), (), (1,))]
    env: dict = {}
    walk.compile_walk(None, steps)(env)
    assert sorted(env) == ["a", "b"] and env["b"].tolist() == [1.0, 1.0, 1.0]
