"""conv2d and pool2d: forward against naive loops, gradients (first and second order) against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard
from tests.grad.checking import check_op_gradients, check_second_order_pairs


def naive_conv2d(x, w, stride, pad, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for b in range(n):
        for f in range(o):
            g = f // per_group
            for i in range(oh):
                for j in range(ow):
                    for cc in range(cg):
                        for a in range(kh):
                            for e in range(kw):
                                out[b, f, i, j] += w[f, cc, a, e] * xp[b, g * cg + cc, i * stride[0] + a * dilation[0],
                                                                       j * stride[1] + e * dilation[1]]
    return out


def naive_pool2d(x, k, stride, pad, kind):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad[0] - k[0]) // stride[0] + 1, (w + 2 * pad[1] - k[1]) // stride[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
            win = x[:, :, max(r0, 0): r0 + k[0], max(c0, 0): c0 + k[1]]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


CONV_CASES = [  # (x shape, filters, kernel, stride, padding, dilation, groups)
    ((2, 3, 5, 5), 4, (3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((1, 2, 6, 5), 3, (2, 3), (2, 1), (1, 2), (1, 1), 1),
    ((2, 4, 7, 7), 4, (3, 3), (1, 2), (1, 1), (2, 2), 2),
    ((1, 6, 5, 6), 6, (1, 2), (1, 1), (0, 1), (1, 1), 3),
    ((2, 4, 5, 6), 4, (3, 2), (1, 1), (1, 1), (1, 1), 4),  # depthwise: its input gradient is a convolution
    ((1, 4, 5, 5), 8, (3, 3), (1, 1), (2, 1), (1, 1), 2),  # padded to the kernel's size less one
]


def _conv_program(xs, f, k, s, p, d, g):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", list(xs), "float64")
        out = layers.conv2d(x, f, k, stride=s, padding=p, dilation=d, groups=g, bias=False, name="c")
    return main, startup, out


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_matches_a_naive_loop(case):
    xs, f, k, s, p, d, g = case
    main, startup, out = _conv_program(*case)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    x = np.random.default_rng(0).standard_normal(xs)
    (got,) = exe.run(main, feed={"x": x}, fetch_list=[out], scope=scope)
    assert got.shape == out.shape
    np.testing.assert_allclose(got, naive_conv2d(x, scope["c.w"], s, p, d, g), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_gradients_first_and_second_order(case):
    xs, f, k, s, p, d, g = case
    rng = np.random.default_rng(1)
    w = rng.standard_normal((f, xs[1] // g) + tuple(k))

    def build(x, w):
        from gradgen.program.layers.helper import append

        return append("conv2d", {"Input": x, "Filter": w}, {"strides": list(s), "paddings": list(p),
                                                            "dilations": list(d), "groups": g}, out_slots=("Output",))

    check_op_gradients(build, {"x": rng.standard_normal(xs), "w": w})


POOL_CASES = [((2, 2, 4, 4), (2, 2), None, (0, 0)), ((1, 3, 5, 6), (3, 2), (2, 1), (1, 1)),
              ((1, 1, 5, 5), (3, 3), (1, 1), (1, 0))]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pool2d_forward_and_gradients(case, kind):
    xs, k, s, p = case
    rng = np.random.default_rng(2)
    # distinct values, so every window has one maximum and finite differences are valid
    x = rng.permutation(np.arange(np.prod(xs), dtype=np.float64)).reshape(xs) * 0.1
    main = Program()
    with program_guard(main, Program()):
        xv = layers.data("x", list(xs), "float64")
        out = layers.pool2d(xv, k, kind, stride=s, padding=p)
    (got,) = Executor().run(main, feed={"x": x}, fetch_list=[out], scope=Scope())
    np.testing.assert_allclose(got, naive_pool2d(x, k, s or k, p, kind), rtol=1e-12)
    check_op_gradients(lambda v: layers.pool2d(v, k, kind, stride=s, padding=p), {"x": x})


def test_conv_layer_with_bias_and_activation_trains_its_parameters():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [2, 1, 4, 4], "float64")
        y = layers.conv2d(x, 2, 3, padding=1, act="tanh", name="c")
        loss = layers.mean(layers.square(y))
        from gradgen.framework import append_backward

        params_grads = append_backward(loss)
    assert [(p.name, g.shape) for p, g in params_grads] == [("c.w", (2, 1, 3, 3)), ("c.b", (2,))]


@pytest.mark.parametrize("layer,prefix", [(layers.conv2d, "conv2d"), (layers.conv2d_transpose, "conv2d_transpose")])
def test_conv_layers_name_their_parameters_as_paddle_with_a_bias_per_channel(layer, prefix):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 2, 5, 5], "float32")
        layer(layer(x, 3, 3), 4, 1)
        layer(x, 3, 3, name="mine")
    params = {v.name: v.shape for v in main.global_block().all_parameters()}
    assert params == {f"{prefix}_0.w_0": (3, 2, 3, 3) if prefix == "conv2d" else (2, 3, 3, 3),
                      f"{prefix}_0.b_0": (3,),
                      f"{prefix}_1.w_0": (4, 3, 1, 1) if prefix == "conv2d" else (3, 4, 1, 1),
                      f"{prefix}_1.b_0": (4,),
                      "mine.w": (3, 2, 3, 3) if prefix == "conv2d" else (2, 3, 3, 3), "mine.b": (3,)}
    assert all(main.global_block().var(n).dtype == "float32" for n in params)


@pytest.mark.parametrize("layer", [layers.conv2d, layers.conv2d_transpose])
@pytest.mark.parametrize("xs", [(2, 2, 4, 3), (1, 1, 3, 3), (0, 2, 3, 3)], ids=str)
def test_conv_layer_gradients_in_input_filter_and_bias_first_and_second_order(layer, xs):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", list(xs), "float64")
        y = layer(x, 2, 2, padding=1, act="tanh")
        w, b = main.global_block().all_parameters()
        r = layers.data("r", list(y.shape), "float64")
        loss = layers.reduce_sum(y * r)
        grads = gradients(loss, [x, w, b])
    assert b.shape == (2,)
    rng = np.random.default_rng(3)
    feed = {v.name: rng.standard_normal(v.shape) for v in (x, w, b, r)}
    exe, scope = Executor(check_types=True), Scope()
    for v, analytic in zip((x, w, b), exe.run(main, feed=feed, fetch_list=grads, scope=scope)):
        np.testing.assert_allclose(analytic, numeric_gradient(main, feed, scope, loss.name, v.name),
                                   rtol=1e-5, atol=1e-6, err_msg=f"d loss / d {v.name}")
    check_second_order_pairs(main, exe, feed, scope, [x, w, b], grads, rng, 1e-4, 1e-5)
