"""Property: for any trip count and sizes, the loop and the unrolled loop agree in value and gradient."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradgen.framework import Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard


def _program(batch: int, width: int, unrolled: int | None):
    main = Program()
    with program_guard(main, Program()):
        xs = layers.data("xs", [-1, batch, width], "float64")
        h0 = layers.data("h0", [batch, width], "float64")
        w = layers.data("w", [width, width], "float64")
        b = layers.data("b", [width], "float64")
        step = lambda h, x: layers.sigmoid(layers.add(layers.matmul(h, w), layers.multiply(x, b)))  # noqa: E731
        if unrolled is None:
            n = layers.data("n", [], "int64")
            one = layers.fill_constant([], "int64", 1)
            _, h = layers.while_loop(lambda t, h: layers.less_than(t, n),
                                     lambda t, h: [layers.add(t, one), step(h, layers.gather(xs, t))],
                                     [layers.fill_constant([], "int64", 0), h0])
        else:
            h = h0
            for t in range(unrolled):
                h = step(h, layers.gather(xs, layers.fill_constant([], "int64", t)))
        loss = layers.reduce_mean(layers.exp(h))
        grads = gradients(loss, [w, b, h0])
    return main, [loss] + grads


@settings(max_examples=15, deadline=None)
@given(steps=st.integers(0, 6), batch=st.integers(1, 3), width=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_loop_and_unrolled_loop_agree(steps, batch, width, seed):
    rng = np.random.default_rng(seed)
    feed = {"xs": rng.standard_normal((steps, batch, width)), "h0": rng.standard_normal((batch, width)),
            "w": rng.standard_normal((width, width)), "b": rng.standard_normal(width)}
    loop, loop_fetch = _program(batch, width, None)
    flat, flat_fetch = _program(batch, width, steps)
    got = Executor().run(loop, feed={**feed, "n": np.int64(steps)}, fetch_list=loop_fetch, scope=Scope())
    want_vars = [v for v in flat_fetch if v is not None]
    want = iter(Executor().run(flat, feed=feed, fetch_list=want_vars, scope=Scope()))
    for name, value, var in zip(["loss", "w", "b", "h0"], got, flat_fetch):
        expected = next(want) if var is not None else np.zeros_like(value)  # no steps: w and b unused
        np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12, err_msg=name)
