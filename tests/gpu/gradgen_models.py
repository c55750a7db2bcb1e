"""The four workloads written with gradgen's layers, and one training step of each on an executor.

``gradgen_step(workload, place, backend)`` builds the program (forward, ``minimize``'s backward and update),
runs its startup, overwrites every parameter with the workload's own initial values, and returns a function that
runs one step and gives the loss as a float (the fetch copies it to the host, so each step is waited for).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .workloads import DTYPE, RNN, TRANSFORMER, Workload

__all__ = ["gradgen_step"]


def _lenet(layers, wl: Workload):
    image = layers.data("x", [-1, 1, 28, 28], DTYPE)
    label = layers.data("y", [-1, 1], "int64")
    h = layers.pool2d(layers.conv2d(image, 6, 5, act="relu", name="c1"), 2, "max")
    h = layers.pool2d(layers.conv2d(h, 16, 5, act="relu", name="c2"), 2, "max")
    h = layers.reshape(h, [-1, 256])
    h = layers.fc(layers.fc(h, 120, act="relu", name="f1"), 84, act="relu", name="f2")
    loss = layers.mean(layers.softmax_with_cross_entropy(layers.fc(h, 10, name="f3"), label))
    return loss, {"x": wl.x, "y": wl.y.reshape(-1, 1)}


def _resnet(layers, wl: Workload):
    image = layers.data("x", [-1, 64, 32, 32], DTYPE)
    label = layers.data("y", [-1, 1], "int64")

    def conv_bn(h, k):
        return layers.batch_norm(layers.conv2d(h, 64, 3, padding=1, bias=False, name=f"conv{k}"), name=f"bn{k}")

    h = image
    for block in range(2):
        inner = layers.relu(conv_bn(h, 2 * block))
        h = layers.relu(conv_bn(inner, 2 * block + 1) + h)
    logits = layers.fc(layers.reduce_mean(h, dim=[2, 3]), 10, name="fc")
    loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
    return loss, {"x": wl.x, "y": wl.y.reshape(-1, 1)}


def _transformer(layers, wl: Workload):
    seq, width, heads = TRANSFORMER["seq"], TRANSFORMER["width"], TRANSFORMER["heads"]
    per_head = width // heads
    x = layers.data("x", [-1, seq, width], DTYPE)
    y = layers.data("y", [-1, seq, width], DTYPE)

    def split_heads(t):
        return layers.transpose(layers.reshape(t, [0, seq, heads, per_head]), [0, 2, 1, 3])

    h = layers.layer_norm(x, begin_norm_axis=-1, name="ln1")
    q, k, v = (split_heads(layers.fc(h, width, name=name)) for name in ("q", "k", "v"))
    scores = layers.scale(layers.matmul(q, k, transpose_y=True), 1.0 / math.sqrt(per_head))
    mixed = layers.matmul(layers.softmax(scores, axis=-1), v)
    x1 = x + layers.fc(layers.reshape(layers.transpose(mixed, [0, 2, 1, 3]), [0, seq, width]), width, name="o")
    h2 = layers.layer_norm(x1, begin_norm_axis=-1, name="ln2")
    out = x1 + layers.fc(layers.gelu(layers.fc(h2, TRANSFORMER["ff"], name="ff1")), width, name="ff2")
    return layers.reduce_mean(layers.square(out - y)), {"x": wl.x, "y": wl.y}


def _rnn(layers, wl: Workload):
    inputs, width = RNN["inputs"], RNN["width"]
    seq = layers.data("seq", [-1, -1, inputs], DTYPE)
    target = layers.data("target", [-1, 1], DTYPE)
    steps = layers.data("steps", [], "int64")
    w_xh = layers.create_parameter([inputs, width], DTYPE, name="w_xh")
    w_hh = layers.create_parameter([width, width], DTYPE, name="w_hh")
    b = layers.create_parameter([width], DTYPE, name="b")
    w_out = layers.create_parameter([width, 1], DTYPE, name="w_out")
    zero, one = layers.fill_constant([], "int64", 0), layers.fill_constant([], "int64", 1)
    h0 = layers.zeros_like(layers.matmul(layers.gather(seq, zero), w_xh))

    def body(t, h):
        return [t + one, layers.tanh(layers.matmul(layers.gather(seq, t), w_xh) + layers.matmul(h, w_hh) + b)]

    _, last = layers.while_loop(lambda t, h: layers.less_than(t, steps), body, [zero, h0], max_iterations=1000)
    loss = layers.reduce_mean(layers.square(layers.matmul(last, w_out) - target))
    return loss, {"seq": wl.x, "target": wl.y, "steps": np.array(RNN["steps"], np.int64)}


_BUILDERS = {"lenet": _lenet, "resnet": _resnet, "transformer": _transformer, "rnn": _rnn}


def _placed(feed: dict[str, np.ndarray], device) -> dict:
    """The feed as jax arrays on ``device`` once (int64 kept: jax would make it int32 outside x64 mode)."""
    import jax

    with jax.enable_x64(True):
        return {name: jax.device_put(value, device) for name, value in feed.items()}


def gradgen_step(wl: Workload, place=None, backend: str = "numpy", feed_device=None) -> Callable[[], float]:
    """One training step of ``wl`` on ``Executor(place, backend=backend)``, from the workload's parameters.

    ``feed_device``: a jax device to hold the batch, as the JAX and PyTorch versions hold theirs, so no step
    copies it from host memory (the xla engine takes a feed of its own arrays as it is)."""
    from gradgen.framework import Executor, Scope, optimizer
    from gradgen.program import Program, layers, program_guard

    main, startup = Program(), Program()
    with program_guard(main, startup):
        loss, feed = _BUILDERS[wl.name](layers, wl)
        if wl.optimizer == "adam":
            rule = optimizer.Adam(learning_rate=wl.learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8)
        else:
            rule = optimizer.SGD(learning_rate=wl.learning_rate)
        rule.minimize(loss)
    declared = {p.name for p in main.all_parameters() if p.trainable}
    if declared != set(wl.params):
        raise ValueError(f"{wl.name}: the program's parameters {sorted(declared)} are not the workload's "
                         f"{sorted(wl.params)}")
    if feed_device is not None:
        feed = _placed(feed, feed_device)
    exe, scope = Executor(place, backend=backend), Scope()
    exe.run(startup, scope=scope)
    for name, value in wl.params.items():
        if tuple(scope[name].shape) != value.shape:
            raise ValueError(f"{wl.name}: parameter {name!r} is {tuple(scope[name].shape)}, not {value.shape}")
        scope.set(name, value.copy())

    def step() -> float:
        (value,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        return float(np.asarray(value).reshape(-1)[0])

    return step
