"""group_norm and instance_norm: forward against numpy, gradients first and second order against finite
differences (x, and the per-channel scale and shift), shapes met at run time."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward
from gradgen.framework.tools.gradcheck import check_gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from tests.grad.checking import check_op_gradients


def reference(x, groups, scale, bias, eps=1e-5):
    g = x.reshape(x.shape[0], groups, -1)
    norm = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + eps)).reshape(x.shape)
    channel = (-1,) + (1,) * (x.ndim - 2)
    return norm * scale.reshape(channel) + bias.reshape(channel)


CASES = [((2, 4, 3), 2), ((1, 6, 2, 3), 3), ((2, 4, 1, 2, 2), 4), ((3, 2, 1), 1), ((2, 3, 1, 1), 3)]


@pytest.mark.parametrize("shape,groups", CASES, ids=str)
def test_group_norm_gradients_first_and_second_order(shape, groups):
    rng = np.random.default_rng(0)
    channel = [shape[1]] + [1] * (len(shape) - 2)

    def build(x, scale, bias):
        y = layers.group_norm(x, groups, scale=False, shift=False)
        return y * layers.reshape(scale, channel) + layers.reshape(bias, channel)  # the layer's own scale and shift

    check_op_gradients(build, {"x": rng.standard_normal(shape), "scale": rng.standard_normal(shape[1]),
                               "bias": rng.standard_normal(shape[1])})


@pytest.mark.parametrize("layer", ["group_norm", "instance_norm"])
def test_forward_parameters_and_their_gradients(layer):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [2, 4, 3, 2], "float64")
        y = layers.group_norm(x, 2, act="tanh") if layer == "group_norm" else layers.instance_norm(x)
        loss = layers.reduce_sum(layers.sin(y))
        params_grads = append_backward(loss)
    assert sorted(p.name for p, _ in params_grads) == [f"{layer}_0.b_0", f"{layer}_0.w_0"]
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    xs, scale, bias = rng.standard_normal((2, 4, 3, 2)), rng.standard_normal(4), rng.standard_normal(4)
    scope.set(f"{layer}_0.w_0", scale)
    scope.set(f"{layer}_0.b_0", bias)
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=scope)
    want = reference(xs, 2 if layer == "group_norm" else 4, scale, bias)
    np.testing.assert_allclose(got, np.tanh(want) if layer == "group_norm" else want, rtol=1e-10, atol=1e-12)
    reports = check_gradients(main, loss.name, {p.name: g.name for p, g in params_grads}, {"x": xs}, scope)
    assert reports and all(r.ok for r in reports), reports


def test_shapes_met_at_run_time_and_the_declared_dtype():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 6, -1, -1], "float32")
        y = layers.group_norm(x, 3, name="gn")
        known = layers.data("k", [-1, 2, 3], "float64")
        z = layers.instance_norm(known)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(2)
    for shape in ((2, 6, 3, 4), (1, 6, 1, 5)):
        xs = rng.standard_normal(shape).astype(np.float32)
        (got,) = exe.run(main, feed={"x": xs, "k": np.ones((1, 2, 3))}, fetch_list=[y], scope=scope)
        assert got.dtype == np.float32 and got.shape == shape
        np.testing.assert_allclose(got, reference(xs.astype(np.float64), 3, np.ones(6), np.zeros(6)), rtol=1e-4,
                                   atol=1e-5)
    (empty,) = exe.run(main, feed={"x": np.ones((1, 6, 2, 2), np.float32), "k": np.ones((0, 2, 3))},
                       fetch_list=[z], scope=scope)
    assert empty.shape == (0, 2, 3)


def test_channels_that_do_not_divide_into_the_groups_are_refused():
    with program_guard(Program(), Program()):
        with pytest.raises(ProgramError, match="group_norm needs a known channel axis 1 that divides into 4 groups"):
            layers.group_norm(layers.data("x", [2, 6, 3], "float64"), 4)
        with pytest.raises(ProgramError, match="instance_norm needs N-C-spatial input"):
            layers.instance_norm(layers.data("y", [2, 6], "float64"))


def test_gradients_of_spatial_sizes_met_at_run_time():
    from tests.grad.checking import check_run_time_gradients

    x = np.random.default_rng(3).standard_normal((2, 4, 3, 2))
    check_run_time_gradients(lambda v: layers.tanh(layers.group_norm(v, 2, scale=False, shift=False)),
                             {"x": [-1, 4, -1, -1]}, {"x": x}, x.shape)
