"""Forward and reverse mode agree on the bundled example networks (MLP, CNN, RNN with a while loop), in float64."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, forward_gradients, gradients
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import Program, layers, program_guard

from .helpers import dot_product_sides


def _float64(program: Program) -> Program:
    """The same program with every float32 var and attr made float64 (the CNN example is built in float32)."""
    return Program.from_json(program.to_json().replace('"float32"', '"float64"'))


def _example(name: str):
    """The example in float64: (main, startup, loss, parameters, feed, a scope holding the initial parameters)."""
    example = EXAMPLES[name]()
    main, startup = _float64(example.main), _float64(example.startup)
    block = main.global_block()
    params = [block.var(p.name) for p in example.params] or block.all_parameters()
    assert params and all(p.dtype == "float64" for p in params)
    feed = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in example.feed.items()}
    scope = Scope()
    Executor().run(startup, scope=scope)
    return main, startup, block.var(example.loss.name), params, feed, scope


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_dot_product_on_the_example(name):
    main, _, loss, params, feed, scope = _example(name)
    lhs, rhs = dot_product_sides(main, [loss], params, feed, np.random.default_rng(9), scope)
    assert lhs == pytest.approx(rhs, rel=1e-10)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_forward_over_reverse_hessian_vector_product_on_the_example(name):
    """H v of the loss in the parameters: forward mode through the backward part = reverse mode again."""
    main, startup, loss, params, feed, scope = _example(name)
    with program_guard(main, startup):
        grads = gradients(loss, params)
        vs = [layers.data(f"v@{p.name}", list(p.shape), p.dtype) for p in params]
        forward = forward_gradients(grads, params, vs)
        inner = [layers.reduce_sum(layers.multiply(g, v)) for g, v in zip(grads, vs)]
        reverse = gradients(layers.sum(inner) if len(inner) > 1 else inner[0], params)
    rng = np.random.default_rng(4)
    feed.update({v.name: rng.standard_normal(v.shape) for v in vs})
    got = Executor().run(main, feed=feed, fetch_list=forward + reverse, scope=scope)
    for p, a, b in zip(params, got[:len(params)], got[len(params):]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max(), err_msg=f"H v for {p.name}")
