"""Shared machinery for gradient tests: build an op on float64 inputs, check first and second order."""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient, numeric_gradients
from gradgen.grad_makers import GRAD_MAKERS
from gradgen.program import Program, layers, program_guard

PASS_OPS = {"sum", "fill_zeros_like", "fill_any_like"}
"""Ops the pass itself adds (accumulation, zero-fill, seeds) rather than a maker."""


def assert_makers_emit_what_they_declare(program) -> None:
    """Each generated op is one its forward op's maker declares in ``emits`` (or an op of the pass)."""
    for op in program.global_block().ops:
        if op.role == "backward" and op.forward_op is not None and op.type not in PASS_OPS:
            declared = GRAD_MAKERS[op.forward_op.type].emits
            assert op.type in declared, f"{op.forward_op.type}'s maker emitted {op.type}, not in {declared}"


def _weighted_sum(out, name: str):
    """sum(out * r) for a fixed random r fed as ``name``: tests a general output gradient, not just ones."""
    r = layers.data(name, list(out.shape), out.dtype)
    return layers.reduce_sum(out * r), r


def check_op_gradients(build: Callable, inputs: Mapping[str, np.ndarray], second_order: bool = True,
                       seed: int = 0, rtol: float = 1e-5, atol: float = 1e-6, extra_feed=None) -> None:
    """Assert that generated first (and second) order gradients of ``build(*vars)`` match finite differences.

    ``inputs`` maps names to float64 arrays (the vars differentiated) and
    ``extra_feed`` to arrays fed but not differentiated (labels, indices).
    ``build`` returns one output var (or the first of a tuple is used).
    """
    rng = np.random.default_rng(seed)
    extra_feed = dict(extra_feed or {})
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, list(a.shape), str(a.dtype)) for n, a in inputs.items()]
        extras = {n: layers.data(n, list(a.shape), str(a.dtype)) for n, a in extra_feed.items()}
        out = build(*xs, **extras)
        if isinstance(out, (tuple, list)):
            out = out[0]
        loss, r = _weighted_sum(out, "r@cotangent")
        grads = gradients(loss, xs)
    assert -1 not in out.shape, "inputs have static shapes, so the output's shape must be known"
    feed = {**inputs, **extra_feed, "r@cotangent": rng.standard_normal(out.shape)}
    exe, scope = Executor(check_types=True), Scope()  # every kernel must keep its type promise
    fetched = exe.run(main, feed=feed, fetch_list=[g for g in grads if g is not None], scope=scope)
    assert all(g is not None for g in grads), f"no gradient for {[x.name for x, g in zip(xs, grads) if g is None]}"
    for x, analytic in zip(xs, fetched):
        numeric = numeric_gradient(main, feed, scope, loss.name, x.name)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"d loss / d {x.name}")
    if not second_order:
        assert_makers_emit_what_they_declare(main)
        return
    check_second_order_pairs(main, exe, feed, scope, xs, grads, rng, rtol * 10, atol * 10)
    assert_makers_emit_what_they_declare(main)


def check_second_order_pairs(main, exe, feed: dict, scope, xs, grads, rng, rtol: float, atol: float) -> None:
    """Check every block of the Hessian against finite differences: for each input i, s_i = sum(grad_i * v_i)
    with a random v_i, and d s_i / d x_j for every input j (the mixed partials of each pair, i != j, on their
    own, so no block can hide behind another's sum). A missing generated gradient must be a numeric zero.

    Adds the v vars and the second-order ops to ``main`` and their values to ``feed``."""
    with program_guard(main, Program()):
        vs = [layers.data(f"v@{x.name}", list(x.shape), x.dtype) for x in xs]
        ss = [layers.reduce_sum(g * v) for g, v in zip(grads, vs)]
        hvps = [gradients(s, xs) for s in ss]  # hvps[i][j] = d s_i / d x_j
    for x, v in zip(xs, vs):
        feed[v.name] = rng.standard_normal(feed[x.name].shape)
    wanted = [(i, j) for i in range(len(xs)) for j in range(len(xs)) if hvps[i][j] is not None]
    fetched = dict(zip(wanted, exe.run(main, feed=feed, fetch_list=[hvps[i][j] for i, j in wanted], scope=scope)))
    for j, x in enumerate(xs):
        numeric = numeric_gradients(main, feed, scope, [s.name for s in ss], x.name)
        for i, s in enumerate(ss):
            pair = f"d2 loss / d {x.name} d {xs[i].name}"
            if (i, j) in fetched:
                np.testing.assert_allclose(fetched[i, j], numeric[i], rtol=rtol, atol=atol,
                                           err_msg=f"second order: {pair}")
            else:  # no generated dependence: the numeric block must vanish
                np.testing.assert_allclose(numeric[i], 0.0, atol=atol, err_msg=f"second order: {pair} is not zero")


def check_run_time_gradients(build, declared, fed, out_shape, rtol=1e-6):
    """Declare vars with ``declared`` shapes (-1 dims met at run time), feed ``fed`` arrays; each gradient has its
    input's run-time shape and matches finite differences, first and second order (every pair of inputs)."""
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(n, shape, "float64") for n, shape in declared.items()]
        out = build(*vs)
        r = layers.data("r", list(out.shape), "float64")
        loss = layers.reduce_sum(out * r)
        grads = gradients(loss, vs)
    rng = np.random.default_rng(8)
    feed = dict(fed)
    feed["r"] = rng.standard_normal(out_shape)
    scope, exe = Scope(), Executor(check_types=True)
    got = exe.run(main, feed=feed, fetch_list=grads, scope=scope)
    for (n, a), g in zip(fed.items(), got):
        assert g.shape == a.shape, f"d loss / d {n} has shape {g.shape}, its input {a.shape}"
        np.testing.assert_allclose(g, numeric_gradient(main, feed, scope, loss.name, n), rtol=rtol, atol=1e-7)
    check_second_order_pairs(main, exe, feed, scope, vs, grads, rng, rtol=1e-5, atol=1e-6)
