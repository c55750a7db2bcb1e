"""batch_norm's ``running_variance``: the running variance moves toward the batch's population variance
(the default, ONNX's and Paddle's rule) or its unbiased one (PyTorch's), on both backends; a bad value, and
"unbiased" with one value per channel, are errors naming the op; an empty batch changes nothing."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from gradgen.program.layers.helper import append
from tests.backends.xla_harness import need_jax
from tests.grad.checking import check_op_gradients

MOMENTUM = 0.8
BACKENDS = ["numpy", "xla"]


def _net(running_variance: str, shape=(-1, 3, 2, 2)):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", list(shape), "float64")
        y = layers.batch_norm(x, momentum=MOMENTUM, name="bn", running_variance=running_variance)
    return main, startup, y


def _executor(backend: str, startup) -> tuple[Executor, Scope]:
    if backend == "xla":
        need_jax()
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    return exe, scope


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("running_variance,ddof", [("population", 0), ("unbiased", 1)])
@pytest.mark.parametrize("shape", [(5, 3, 2, 2), (4, 3), (1, 3, 2)], ids=str)
def test_the_running_variance_moves_toward_the_chosen_estimate(backend, running_variance, ddof, shape):
    main, startup, y = _net(running_variance, (-1,) + shape[1:])
    exe, scope = _executor(backend, startup)
    rng = np.random.default_rng(3)
    want_mean, want_var = np.zeros(3), np.ones(3)
    for step in range(3):
        xs = rng.standard_normal(shape) * 2 + 1
        (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=scope)
        axes = (0,) + tuple(range(2, len(shape)))
        mu, population = xs.mean(axis=axes), xs.var(axis=axes)
        want_mean = MOMENTUM * want_mean + (1 - MOMENTUM) * mu
        want_var = MOMENTUM * want_var + (1 - MOMENTUM) * xs.var(axis=axes, ddof=ddof)
        per_channel = (slice(None),) + (None,) * (len(shape) - 2)
        normalized = (xs - mu[per_channel]) / np.sqrt(population[per_channel] + 1e-5)
        np.testing.assert_allclose(got, normalized, rtol=1e-10, err_msg="the batch's population variance normalizes")
        np.testing.assert_allclose(scope["bn.mean"], want_mean, rtol=1e-12, err_msg=f"running mean, step {step}")
        np.testing.assert_allclose(scope["bn.variance"], want_var, rtol=1e-12, err_msg=f"running var, step {step}")


def test_the_default_is_population_and_the_attr_survives_serialization_and_clone():
    main, _, _ = _net("unbiased")
    (op,) = main.global_block().ops
    assert op.attr("running_variance") == "unbiased"
    assert Program.from_json(main.to_json()).global_block().ops[0].attr("running_variance") == "unbiased"
    assert main.clone(for_test=True).global_block().ops[0].attr("running_variance") == "unbiased"
    default = Program()
    with program_guard(default, Program()):
        layers.batch_norm(layers.data("x", [-1, 3], "float64"))
    assert default.global_block().ops[0].attr("running_variance") == "population"


def test_a_running_variance_that_is_neither_estimator_is_refused_naming_the_op_and_attr():
    with pytest.raises(ProgramError, match=r"op #0 \(batch_norm\).*running_variance must be 'population' or "
                                           r"'unbiased', got 'sample'"):
        _net("sample")


def test_unbiased_with_one_value_per_channel_known_at_build_time_is_refused():
    with pytest.raises(ProgramError, match=r"\(batch_norm\).*running_variance='unbiased' needs more than one value "
                                           r"per channel, but X of shape \[1, 3, 1\] has one"):
        _net("unbiased", (1, 3, 1))
    _net("population", (1, 3, 1))  # the population variance of one value is 0: nothing to refuse
    _net("unbiased", (-1, 3, 1))  # known only at run time


@pytest.mark.parametrize("backend", BACKENDS)
def test_unbiased_with_one_value_per_channel_at_run_time_fails_the_run_and_keeps_the_statistics(backend):
    """PyTorch refuses such a batch in training; its sample variance 0 / 0 would make the running one NaN."""
    main, startup, y = _net("unbiased", (-1, 3, 1))
    exe, scope = _executor(backend, startup)
    exe.run(main, feed={"x": np.random.default_rng(0).standard_normal((4, 3, 1))}, fetch_list=[y], scope=scope)
    before = scope["bn.mean"].copy(), scope["bn.variance"].copy()
    with pytest.raises(ExecutionError, match=r"\(batch_norm\).*running_variance='unbiased' needs more than one "
                                             r"value per channel, but X of shape \[1, 3, 1\] has one"):
        exe.run(main, feed={"x": np.ones((1, 3, 1))}, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(scope["bn.mean"], before[0])
    np.testing.assert_array_equal(scope["bn.variance"], before[1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("running_variance", ["population", "unbiased"])
def test_an_empty_batch_leaves_the_running_statistics_as_they_were(backend, running_variance):
    """Statistics of no elements are NaN; mixed into the running ones they would poison every later inference.
    An empty batch (a last partial batch of nothing, an empty shard) tells nothing, so it changes nothing."""
    main, startup, y = _net(running_variance)
    exe, scope = _executor(backend, startup)
    exe.run(main, feed={"x": np.random.default_rng(4).standard_normal((5, 3, 2, 2))}, fetch_list=[y], scope=scope)
    before = scope["bn.mean"].copy(), scope["bn.variance"].copy()
    (got,) = exe.run(main, feed={"x": np.zeros((0, 3, 2, 2))}, fetch_list=[y], scope=scope)
    assert got.shape == (0, 3, 2, 2)
    np.testing.assert_array_equal(scope["bn.mean"], before[0])
    np.testing.assert_array_equal(scope["bn.variance"], before[1])


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2), (3, 1, 2)], ids=str)
def test_unbiased_batch_norm_gradients_first_and_second_order(shape):
    """The estimator touches only the running statistics, which are not differentiated: Y's gradients are the
    population rule's, checked here against finite differences all the same."""
    def build(x, scale, bias, mean, var):
        return append("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
                      {"epsilon": 1e-3, "running_variance": "unbiased"}, out_slots=("Y", "MeanOut", "VarianceOut"))[0]

    rng = np.random.default_rng(5)
    c = shape[1]
    check_op_gradients(build, {"x": rng.standard_normal(shape), "scale": rng.uniform(0.5, 2, c),
                               "bias": rng.standard_normal(c)},
                       extra_feed={"mean": rng.standard_normal(c), "var": rng.uniform(0.5, 2.0, c)})
