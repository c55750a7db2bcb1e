"""Paddle Fluid's optimizer, regularizer, clip, ``elementwise_*``, ``mul`` and ``nets`` names, written as Paddle
scripts write them, against numpy forms of what Paddle computes."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, fluid, optimizer
from gradgen.program import Program, program_guard
from gradgen.program.errors import ProgramError


def _run(build, feed, steps=1):
    """Build with ``build()`` (returns the fetches) in fresh programs; run startup then ``steps`` steps."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        fetches = build()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    out = [exe.run(main, feed=feed, fetch_list=fetches, scope=scope) for _ in range(steps)]
    return out, scope


@pytest.mark.parametrize("x_shape, y_shape, axis", [((2, 3, 4), (3,), 1), ((2, 3, 4), (3, 4), 1),
                                                    ((2, 3, 4), (2,), 0), ((2, 3, 4), (4,), -1),
                                                    ((2, 3, 4), (2, 3, 4), -1)])
def test_elementwise_add_broadcasts_y_from_axis_as_paddle_does(x_shape, y_shape, axis):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)

    def build():
        xv = fluid.layers.data("x", list(x_shape), "float64", append_batch_size=False)
        yv = fluid.layers.data("y", list(y_shape), "float64", append_batch_size=False)
        return [fluid.layers.elementwise_add(xv, yv, axis=axis),
                fluid.layers.elementwise_mul(xv, yv, axis=axis, act="relu")]

    [(added, multiplied)], _ = _run(build, {"x": x, "y": y})
    start = len(x_shape) - len(y_shape) if axis == -1 else axis
    y_full = y.reshape((1,) * start + y_shape + (1,) * (len(x_shape) - start - len(y_shape)))
    np.testing.assert_allclose(added, x + y_full, rtol=1e-15)
    np.testing.assert_allclose(multiplied, np.maximum(x * y_full, 0), rtol=1e-15)


def test_elementwise_axis_outside_x_is_an_error():
    with program_guard(Program(), Program()):
        x = fluid.layers.data("x", [2, 3], "float64", append_batch_size=False)
        y = fluid.layers.data("y", [3], "float64", append_batch_size=False)
        with pytest.raises(ProgramError, match="axis 2"):
            fluid.layers.elementwise_add(x, y, axis=2)


@pytest.mark.parametrize("x_shape, y_shape, xn, yn", [((5, 4), (4, 3), 1, 1), ((2, 3, 4), (12, 5), 1, 1),
                                                      ((2, 3, 4), (4, 5), 2, 1), ((2, 3, 4), (4, 5, 2), 2, 1),
                                                      ((2, 6), (2, 3, 4), 1, 2)])
def test_mul_flattens_at_num_col_dims(x_shape, y_shape, xn, yn):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)

    def build():
        xv = fluid.layers.data("x", [-1, *x_shape[1:]], "float64", append_batch_size=False)
        yv = fluid.layers.data("y", list(y_shape), "float64", append_batch_size=False)
        return [fluid.layers.mul(xv, yv, x_num_col_dims=xn, y_num_col_dims=yn)]

    [(out,)], _ = _run(build, {"x": x, "y": y})
    x2 = x.reshape(int(np.prod(x_shape[:xn])), -1)
    y2 = y.reshape(int(np.prod(y_shape[:yn])), -1)
    np.testing.assert_allclose(out, (x2 @ y2).reshape(x_shape[:xn] + y_shape[yn:]), rtol=1e-13)


def test_mul_with_mismatched_inner_sizes_names_both():
    with program_guard(Program(), Program()):
        x = fluid.layers.data("x", [2, 3, 4], "float64", append_batch_size=False)
        y = fluid.layers.data("y", [5, 2], "float64", append_batch_size=False)
        with pytest.raises(ProgramError, match=r"12 columns .* 5 rows"):
            fluid.layers.mul(x, y)


@pytest.mark.parametrize("global_pooling", [False, True])
def test_simple_img_conv_pool_is_conv_act_then_pool(global_pooling):
    rng = np.random.default_rng(2)
    img = rng.standard_normal((2, 1, 6, 6))

    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = fluid.layers.data("img", [1, 6, 6], "float64")
        out = fluid.nets.simple_img_conv_pool(x, num_filters=2, filter_size=3, pool_size=2, pool_stride=2,
                                              act="relu", global_pooling=global_pooling)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    assert scope["conv2d_0.w_0"].shape == (2, 1, 3, 3) and scope["conv2d_0.b_0"].shape == (2,)  # Paddle's names
    w, b = scope["conv2d_0.w_0"], np.array([0.3, -0.2])
    scope.set("conv2d_0.b_0", b)  # the bias starts at zeros: give it values that show it is added before the relu
    (out,) = exe.run(main, feed={"img": img}, fetch_list=[out], scope=scope)
    windows = np.lib.stride_tricks.sliding_window_view(img, (3, 3), axis=(2, 3))  # N, C, 4, 4, 3, 3
    conv = np.maximum(np.einsum("nchwij,ocij->nohw", windows, w) + b[:, None, None], 0)
    pooled = conv.max(axis=(2, 3), keepdims=True) if global_pooling else conv.reshape(2, 2, 2, 2, 2, 2).max(axis=(3, 5))
    np.testing.assert_allclose(out, pooled, rtol=1e-13)


# -- optimizers -------------------------------------------------------------------------------------------------
def _quadratic_steps(opt, steps=4):
    rng = np.random.default_rng(3)
    t = rng.standard_normal(5) * 4

    def build():
        w = fluid.layers.create_parameter([5], "float64", name="w")
        target = fluid.layers.data("t", [5], "float64", append_batch_size=False)
        loss = fluid.layers.reduce_sum(fluid.layers.square(w - target))
        opt.minimize(loss)
        return []

    main, startup = Program(), Program()
    with program_guard(main, startup):
        build()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    w0 = np.linspace(-1.0, 1.0, 5)
    scope.set("w", w0.copy())
    path = []
    for _ in range(steps):
        exe.run(main, feed={"t": t}, scope=scope)
        path.append(np.array(scope["w"]))
    return path, w0, t


def test_regularization_and_global_norm_clip_apply_in_paddles_order_clip_first():
    opt = fluid.optimizer.SGDOptimizer(learning_rate=0.1, regularization=fluid.regularizer.L2Decay(0.5),
                                       grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=1.0))
    path, w, t = _quadratic_steps(opt)
    for got in path:
        g = 2 * (w - t)
        g = g * 1.0 / max(np.linalg.norm(g), 1.0) + 0.5 * w  # Paddle: clip, then add the L2 term
        w = w - 0.1 * g
        np.testing.assert_allclose(got, w, rtol=1e-13)


@pytest.mark.parametrize("paddle, gradgen", [
    (lambda: fluid.optimizer.AdamOptimizer(0.05, beta1=0.8), lambda: optimizer.Adam(0.05, beta1=0.8)),
    (lambda: fluid.optimizer.Adam(0.05), lambda: optimizer.Adam(0.05)),
    (lambda: fluid.optimizer.MomentumOptimizer(0.05, momentum=0.8, use_nesterov=True),
     lambda: optimizer.Momentum(0.05, momentum=0.8, use_nesterov=True)),
    (lambda: fluid.optimizer.AdagradOptimizer(0.3, epsilon=1e-5), lambda: optimizer.Adagrad(0.3, epsilon=1e-5)),
    (lambda: fluid.optimizer.RMSPropOptimizer(0.05, rho=0.9, momentum=0.5, centered=True),
     lambda: optimizer.RMSProp(0.05, rho=0.9, momentum=0.5, centered=True)),
    (lambda: fluid.optimizer.LambOptimizer(0.05, lamb_weight_decay=0.1), lambda: optimizer.Lamb(0.05, 0.1)),
    (lambda: fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2DecayRegularizer(0.2)),
     lambda: optimizer.SGD(0.1, weight_decay=0.2)),
], ids=["AdamOptimizer", "Adam", "MomentumOptimizer", "AdagradOptimizer", "RMSPropOptimizer", "LambOptimizer",
        "SGD+L2DecayRegularizer"])
def test_paddle_named_optimizers_take_gradgens_path(paddle, gradgen):
    got, _, _ = _quadratic_steps(paddle())
    want, w0, _ = _quadratic_steps(gradgen())
    np.testing.assert_array_equal(np.array(got), np.array(want))
    assert not np.allclose(got[-1], w0)


def test_other_regularizers_and_clips_are_refused_by_name():
    with pytest.raises(ProgramError, match="L2Decay, got float"):
        fluid.optimizer.AdamOptimizer(0.1, regularization=0.1)
    with pytest.raises(ProgramError, match="GradientClipByGlobalNorm, got float"):
        fluid.optimizer.AdamOptimizer(0.1, grad_clip=1.0)


def test_a_paddle_style_conv_net_trains_with_adam_l2_decay_and_clipping():
    """recognize_digits' conv net in miniature, as a Paddle 1.x script writes it: the loss falls."""
    rng = np.random.default_rng(4)
    images = rng.standard_normal((16, 1, 8, 8)).astype("float32")
    labels = (images[:, 0, :4].sum(axis=(1, 2)) > 0).astype("int64").reshape(16, 1)

    def build():
        img = fluid.layers.data(name="img", shape=[1, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        conv_pool = fluid.nets.simple_img_conv_pool(input=img, filter_size=3, num_filters=4, pool_size=2,
                                                    pool_stride=2, act="relu")
        prediction = fluid.layers.fc(input=conv_pool, size=2, act="softmax")
        avg_loss = fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=label))
        fluid.optimizer.AdamOptimizer(learning_rate=0.01, regularization=fluid.regularizer.L2Decay(1e-4),
                                      grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0)).minimize(avg_loss)
        return [avg_loss]

    out, scope = _run(build, {"img": images, "label": labels}, steps=60)
    losses = [float(o[0][0]) for o in out]
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])
    assert all(scope[n].dtype == np.float32 for n in scope if scope[n].dtype.kind == "f")
