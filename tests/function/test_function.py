"""``gradgen.framework.function``: the same training as the classic form, one program per signature, parameters kept."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

from gradgen.framework import Executor, Function, Scope, append_backward, function, optimizer
from gradgen.program import Program, layers, program_guard

RNG = np.random.default_rng(34)
XS, YS = RNG.standard_normal((32, 20)), RNG.standard_normal((32, 3))
W1, W2 = RNG.standard_normal((20, 16)) * 0.3, RNG.standard_normal((16, 3)) * 0.3


def mlp_loss(x, y):
    w1 = layers.create_parameter([20, 16], "float64", name="w1")
    w2 = layers.create_parameter([16, 3], "float64", name="w2")
    return layers.reduce_sum(layers.square(layers.relu(x @ w1) @ w2 - y))


def classic_losses(steps: int) -> list[float]:
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 20], "float64")
        y = layers.data("y", [-1, 3], "float64")
        loss = mlp_loss(x, y)
        optimizer.SGD(learning_rate=1e-3).apply_gradients(append_backward(loss))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    scope.set("w1", W1)
    scope.set("w2", W2)
    return [float(exe.run(main, feed={"x": XS, "y": YS}, fetch_list=[loss], scope=scope)[0]) for _ in range(steps)]


def test_an_mlp_trained_with_function_matches_the_classic_form_step_for_step():
    step = function(mlp_loss, optimizer=optimizer.SGD(learning_rate=1e-3))
    step.build(XS, YS)
    step.scope.set("w1", W1)
    step.scope.set("w2", W2)
    losses = [float(step(XS, YS)) for _ in range(20)]
    expected = classic_losses(20)
    np.testing.assert_allclose(losses, expected, rtol=1e-12, atol=0)
    assert losses[-1] < 0.5 * losses[0]  # it trains: parameters persist in step.scope between calls
    assert sorted(step.scope) == ["learning_rate_float64_0", "w1", "w2"]


def test_the_first_call_initializes_as_the_classic_startup_does():
    step = function(mlp_loss)
    step(XS, YS)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        mlp_loss(layers.data("x", [-1, 20], "float64"), layers.data("y", [-1, 3], "float64"))
    scope = Scope()
    Executor().run(startup, scope=scope)
    for name in ("w1", "w2"):
        np.testing.assert_array_equal(step.scope[name], scope[name])


def test_decorator_forms_build_the_same_function():
    @function
    def bare(x):
        return layers.tanh(x)

    @function(optimizer=optimizer.SGD(0.1))
    def with_options(x):
        return layers.reduce_sum(layers.fc(x, 1))

    assert isinstance(bare, Function) and isinstance(with_options, Function)
    assert bare.__name__ == "bare" and with_options.optimizer.learning_rate == 0.1
    np.testing.assert_allclose(bare(XS), np.tanh(XS), rtol=1e-12)
    assert with_options(XS).shape == ()


def test_a_new_batch_size_reuses_the_program():
    step = function(mlp_loss, optimizer=optimizer.SGD(learning_rate=1e-3))
    step(XS, YS)
    program = step.program
    step(XS[:5], YS[:5])
    assert len(step.programs) == 1 and step.program is program
    assert program.global_block().var("x").shape == (-1, 20)


def test_exact_shapes_builds_a_program_per_shape():
    step = function(lambda x: layers.reduce_sum(x), exact_shapes=True)
    step(XS)
    step(XS[:5])
    assert [p.global_block().var("x").shape for p in step.programs.values()] == [(32, 20), (5, 20)]


def test_a_new_dtype_builds_a_second_program_with_that_dtype():
    double = function(lambda x: layers.scale(layers.tanh(x), 2.0))
    out64 = double(XS)
    out32 = double(XS.astype("float32"))
    assert len(double.programs) == 2
    assert out64.dtype == np.float64 and out32.dtype == np.float32
    assert [str(s) for s in double.programs] == ["x: float64[-1, 20]", "x: float32[-1, 20]"]
    np.testing.assert_allclose(out32, 2 * np.tanh(XS), rtol=1e-6)
    double(XS[:3])
    assert len(double.programs) == 2 and double.program is list(double.programs.values())[0]


def test_a_changed_static_argument_builds_a_new_program_that_shares_the_parameters():
    @function
    def layer(x, act="relu"):
        return layers.fc(x, 4, act=act)

    relu_out = layer(XS)
    tanh_out = layer(XS, act="tanh")
    layer(XS, "relu")
    assert len(layer.programs) == 2 and sorted(layer.scope) == ["fc_0.b_0", "fc_0.w_0"]
    pre = XS @ layer.scope["fc_0.w_0"] + layer.scope["fc_0.b_0"]
    np.testing.assert_allclose(relu_out, np.maximum(pre, 0), rtol=1e-12)
    np.testing.assert_allclose(tanh_out, np.tanh(pre), rtol=1e-12)
    assert [s.static for s in layer.programs] == [(("act", str, "relu"),), (("act", str, "tanh"),)]


def test_int_and_float_static_values_are_different_keys():
    step = function(lambda x, k: layers.scale(x, k))
    np.testing.assert_array_equal(step(XS, 2), 2 * XS)
    np.testing.assert_array_equal(step(XS, 2.0), 2 * XS)
    assert len(step.programs) == 2


def test_the_program_prints_saves_explains_and_loads(tmp_path):
    step = function(mlp_loss, optimizer=optimizer.SGD(learning_rate=1e-3))
    step(XS, YS)
    text = str(step.program)
    assert "x" in text and "sgd(Param=w1" in text and "w1@GRAD" in text
    assert step.program.explain().startswith("<!DOCTYPE html>")
    step.program.save(tmp_path / "main.json")
    step.startup_program.save(tmp_path / "startup.json")
    loaded = Program.load(tmp_path / "main.json")
    assert loaded.to_json() == step.program.to_json()
    exe, scope = Executor(), Scope()
    for name in step.scope:
        scope.set(name, step.scope[name])
    (loss,) = exe.run(loaded, feed={"x": XS, "y": YS}, fetch_list=["reduce_sum_0"], scope=scope)
    assert float(loss) == pytest.approx(float(step(XS, YS)), rel=1e-12)


def test_a_forward_function_returns_values_in_the_structure_it_returned():
    Pair = namedtuple("Pair", "low high")

    @function
    def stats(x, y):
        return {"sum": layers.reduce_sum(x), "both": (layers.tanh(y), [x]), "pair": Pair(layers.reduce_min(x),
                                                                                          layers.reduce_max(x))}

    out = stats(XS, y=YS)
    assert set(out) == {"sum", "both", "pair"} and isinstance(out["pair"], Pair)
    assert float(out["sum"]) == pytest.approx(XS.sum(), rel=1e-12)
    np.testing.assert_array_equal(out["both"][1][0], XS)
    np.testing.assert_allclose(out["both"][0], np.tanh(YS), rtol=1e-12)
    assert (float(out["pair"].low), float(out["pair"].high)) == (XS.min(), XS.max())


def test_keyword_and_star_arguments_become_named_inputs():
    @function
    def total(*parts, **named):
        return layers.sum([*parts, *named.values()])

    np.testing.assert_allclose(total(XS, XS, extra=XS), 3 * XS, rtol=1e-12)
    assert [i.name for i in total.signature.inputs] == ["parts_0", "parts_1", "extra"]


def test_a_backend_by_name_or_executor():
    exe = Executor(backend="numpy")
    by_executor = function(lambda x: layers.tanh(x), backend=exe)
    by_name = function(lambda x: layers.tanh(x), backend="numpy")
    np.testing.assert_array_equal(by_executor(XS), by_name(XS))
    assert by_executor.executor is exe and by_name.executor.backend == "numpy"


def test_gradgen_framework_function_is_one_callable_in_both_forms():
    import gradgen.framework

    assert callable(gradgen.framework.function) and gradgen.framework.function is function
    assert isinstance(gradgen.framework.function(lambda x: x), Function)
    assert isinstance(gradgen.framework.function(optimizer=None)(lambda x: x), Function)


def test_the_xla_backend_runs_the_same_function():
    from gradgen.framework import backends
    from tests.extras import require

    require(None if "xla" in backends() else "jax", "pip install -e '.[xla]'")
    numpy_step = function(mlp_loss, optimizer=optimizer.Adam(1e-2))
    xla_step = function(mlp_loss, optimizer=optimizer.Adam(1e-2), backend="xla")
    np.testing.assert_allclose([float(xla_step(XS, YS)) for _ in range(5)],
                               [float(numpy_step(XS, YS)) for _ in range(5)], rtol=1e-12)


def test_a_prediction_function_shares_the_training_scope():
    def model(x):
        return layers.fc(layers.fc(x, 8, act="tanh"), 3)

    @function(optimizer=optimizer.SGD(0.05))
    def train(x, y):
        return layers.reduce_mean(layers.square(model(x) - y))

    predict = function(model, scope=train.scope)
    before = predict(XS)
    first = float(train(XS, YS))
    for _ in range(10):
        train(XS, YS)
    after = predict(XS)
    assert predict.scope is train.scope and not np.allclose(before, after)
    assert float(np.mean((after - YS) ** 2)) < first


def test_a_partial_is_a_function_too():
    from functools import partial

    scaled = function(partial(lambda x, k: layers.scale(x, k), k=3.0))
    np.testing.assert_array_equal(scaled(XS), 3 * XS)
    assert "partial" in repr(scaled) and "1 program(s)" in repr(scaled)
