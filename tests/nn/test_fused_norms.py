"""layer_norm, and the fused gradient ops layer_norm_grad, batch_norm_grad and softmax_grad: finite differences
in float64, first and second order (every input pair through one Hessian-vector product), on several shapes
including size-1 and zero-size dims and batch dims met only at run time; and the fused forward against the
composition of ordinary ops it replaced."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from tests.grad.checking import check_op_gradients


def _randn(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _layer_norm(begin, eps=1e-3):
    def build(x, scale=None, bias=None):
        inputs = {"X": x, **({"Scale": scale} if scale is not None else {}), **({"Bias": bias} if bias is not None
                                                                                else {})}
        return append("layer_norm", inputs, {"begin_norm_axis": begin, "epsilon": eps},
                      out_slots=("Y", "Mean", "Variance"))

    return build


LAYER_SHAPES = [((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((1, 5), 1), ((4, 1, 3), 2), ((2, 1), 0),
                ((0, 3), 1)]


@pytest.mark.parametrize("affine", ["none", "scale", "bias", "both"])
@pytest.mark.parametrize("shape,begin", LAYER_SHAPES, ids=str)
def test_layer_norm_first_and_second_order(shape, begin, affine):
    split = begin % len(shape)
    inputs = {"x": _randn(shape, 1) * 2 + 0.5}
    if affine in ("scale", "both"):
        inputs["scale"] = _randn(shape[split:], 2)
    if affine in ("bias", "both"):
        inputs["bias"] = _randn(shape[split:], 3)
    names = list(inputs)
    check_op_gradients(lambda *vs: _layer_norm(begin)(**dict(zip(names, vs))), inputs)


def test_layer_norm_mean_and_variance_outputs_carry_gradients():
    def build(x, scale):
        y, mean, var = _layer_norm(1)(x, scale)
        return y * layers.unsqueeze(mean, [1]) + layers.unsqueeze(var * var, [1])

    check_op_gradients(build, {"x": _randn((3, 4), 4), "scale": _randn((4,), 5)})


def _layer_norm_grad(begin):
    def build(x, dy, scale=None):
        inputs = {"X": x, "Y@GRAD": dy, **({"Scale": scale} if scale is not None else {})}
        outs = ("X@GRAD",) + (("Scale@GRAD",) if scale is not None else ()) + ("Bias@GRAD",)
        return append("layer_norm_grad", inputs, {"begin_norm_axis": begin, "epsilon": 1e-3}, out_slots=outs)

    return build


def _summed(outputs):
    """One output var that depends on every output of a grad op (each through a different nonlinearity)."""
    total = layers.reduce_sum(outputs[0] * layers.sin(outputs[0]))
    for k, out in enumerate(outputs[1:]):
        total = total + layers.reduce_sum(out * out) * (k + 2.0)
    return total


@pytest.mark.parametrize("with_scale", [False, True])
@pytest.mark.parametrize("shape,begin", [((3, 4), 1), ((2, 2, 3), 1), ((2, 2, 3), 2), ((1, 1), 1)], ids=str)
def test_layer_norm_grad_first_and_second_order(shape, begin, with_scale):
    split = begin % len(shape)
    inputs = {"x": _randn(shape, 6), "dy": _randn(shape, 7)}
    if with_scale:
        inputs["scale"] = _randn(shape[split:], 8)
    names = list(inputs)
    check_op_gradients(lambda *vs: _summed(_layer_norm_grad(begin)(**dict(zip(names, vs)))), inputs)


def _batch_norm_grad(is_test):
    def build(x, scale, dy, mean=None, var=None):
        stats = {"Mean": mean, "Variance": var} if is_test else {}
        return append("batch_norm_grad", {"X": x, "Scale": scale, "Y@GRAD": dy, **stats},
                      {"is_test": is_test, "epsilon": 1e-3}, out_slots=("X@GRAD", "Scale@GRAD", "Bias@GRAD"))

    return build


@pytest.mark.parametrize("is_test", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2), (3, 1, 2), (2, 2, 1, 3)], ids=str)
def test_batch_norm_grad_first_and_second_order(shape, is_test):
    c = shape[1]
    rng = np.random.default_rng(9)
    inputs = {"x": rng.standard_normal(shape), "scale": rng.uniform(0.5, 2, c), "dy": rng.standard_normal(shape)}
    fed = {"mean": rng.standard_normal(c), "var": rng.uniform(0.5, 2.0, c)} if is_test else {}
    check_op_gradients(lambda x, scale, dy, **stats: _summed(_batch_norm_grad(is_test)(x, scale, dy, **stats)),
                       inputs, extra_feed=fed)


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 1), 1), ((1, 3), 0),
                                        ((0, 3), 1), ((5,), 0)], ids=str)
def test_softmax_grad_first_and_second_order(shape, axis):
    def build(out, dout):
        return append("softmax_grad", {"Out": out, "Out@GRAD": dout}, {"axis": axis}, out_slots=("X@GRAD",))

    check_op_gradients(build, {"out": _randn(shape, 10), "dout": _randn(shape, 11)})


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 4), 1), ((2, 1), 0)], ids=str)
def test_softmax_second_order_through_the_fused_op(shape, axis):
    check_op_gradients(lambda x: layers.softmax(x, axis) * layers.sin(x), {"x": _randn(shape, 12)})


RUN_TIME_BATCH = {
    "layer_norm_last": lambda x: layers.layer_norm(x, begin_norm_axis=-1),
    "layer_norm_two_dims": lambda x: layers.layer_norm(x, begin_norm_axis=1),
    "batch_norm": lambda x: layers.batch_norm(x),
    "softmax": lambda x: layers.softmax(x, axis=1),
}


@pytest.mark.parametrize("name", sorted(RUN_TIME_BATCH))
def test_first_and_second_order_with_a_batch_dim_met_at_run_time(name):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3, 4], "float64")
        v = layers.data("v", [-1, 3, 4], "float64")
        out = RUN_TIME_BATCH[name](x)
        assert out.shape[0] == -1
        loss = layers.reduce_sum(out * layers.sin(out))
        (dx,) = gradients(loss, [x])
        hvp_target = layers.reduce_sum(dx * v)
        (hvp,) = gradients(hvp_target, [x])
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for batch in (1, 3):
        rng = np.random.default_rng(batch)
        feed = {"x": rng.standard_normal((batch, 3, 4)) * 1.5, "v": rng.standard_normal((batch, 3, 4))}
        got_dx, got_hvp = exe.run(main, feed=feed, fetch_list=[dx, hvp], scope=scope)
        np.testing.assert_allclose(got_dx, numeric_gradient(main, feed, scope, loss.name, "x"), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_hvp, numeric_gradient(main, feed, scope, hvp_target.name, "x"), rtol=1e-4,
                                   atol=1e-5)


def _composed_layer_norm(x, begin, eps, scale, bias):
    """The composition of ordinary ops layers.layer_norm recorded before it became one op."""
    dims = list(range(begin, len(x.shape)))
    centred = x - layers.reduce_mean(x, dim=dims, keep_dim=True)
    variance = layers.reduce_mean(centred * centred, dim=dims, keep_dim=True)
    return centred * layers.pow(variance + eps, -0.5) * scale + bias


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-13), ("float32", 2e-6)])
@pytest.mark.parametrize("shape,begin", [((16, 8, 32), 2), ((5, 3, 4), 1)], ids=str)
def test_layer_norm_op_equals_the_old_composition_to_rounding(shape, begin, dtype, rtol):
    rng = np.random.default_rng(13)
    normalized = list(shape[begin:])
    feed = {"x": (rng.standard_normal(shape) * 3 + 1).astype(dtype), "scale": rng.standard_normal(normalized)
            .astype(dtype), "bias": rng.standard_normal(normalized).astype(dtype)}
    main = Program()
    with program_guard(main, Program()):
        x, scale, bias = (layers.data(k, list(v.shape), dtype) for k, v in feed.items())
        fused = _layer_norm(begin, 1e-5)(x, scale, bias)[0]
        composed = _composed_layer_norm(x, begin, 1e-5, scale, bias)
        dfused, dcomposed = (gradients(layers.reduce_sum(y * layers.sin(y)), [x, scale, bias])
                             for y in (fused, composed))
    got = Executor(check_types=True).run(main, feed=feed, fetch_list=[fused, composed, *dfused, *dcomposed])
    assert all(g.dtype == np.dtype(dtype) for g in got)
    for a, b in zip(got[:1] + got[2:5], got[1:2] + got[5:]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * 10)


def test_layer_norm_layer_builds_one_op_and_keeps_its_parameter_names():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 6], "float32")
        layers.layer_norm(x)
        layers.layer_norm(x, name="ln", shift=False)
    ops = main.global_block().ops
    assert [op.type for op in ops] == ["layer_norm", "layer_norm"]
    assert ops[0].input("Scale") == ["layer_norm_0.w_0"] and ops[0].input("Bias") == ["layer_norm_0.b_0"]
    assert ops[1].input("Scale") == ["ln.scale"] and not ops[1].input("Bias")


@pytest.mark.parametrize("kind", ["layer_norm", "batch_norm"])
def test_arrays_a_caller_still_holds_are_never_reused_by_the_next_run(kind):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [4, 3, 5], "float64")
        y = layers.layer_norm(x, begin_norm_axis=1) if kind == "layer_norm" else layers.batch_norm(x)
        (dx,) = gradients(layers.reduce_sum(y * layers.sin(y)), [x])
    exe, scope = Executor(), Scope()
    if kind == "batch_norm":
        for name in ("batch_norm_0.scale", "batch_norm_0.bias", "batch_norm_0.mean", "batch_norm_0.variance"):
            scope.set(name, np.ones(3) if name.endswith(("scale", "variance")) else np.zeros(3))
    else:
        scope.set("layer_norm_0.w_0", np.ones((3, 5)))
        scope.set("layer_norm_0.b_0", np.zeros((3, 5)))
    first = exe.run(main, feed={"x": _randn((4, 3, 5), 20)}, fetch_list=[y, dx], scope=scope)
    kept = [a.copy() for a in first]
    exe.run(main, feed={"x": _randn((4, 3, 5), 21)}, fetch_list=[y, dx], scope=scope)
    for held, copy in zip(first, kept):
        np.testing.assert_array_equal(held, copy)
