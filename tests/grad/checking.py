"""Shared machinery for gradient tests: build an op on float64 inputs, check first and second order."""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
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
    # Second order: s = sum_i sum(grad_i * v_i); its gradient is a Hessian-vector product.
    with program_guard(main, Program()):
        vs = [layers.data(f"v@{x.name}", list(x.shape), x.dtype) for x in xs]
        s = layers.sum([layers.reduce_sum(g * v) for g, v in zip(grads, vs)]) if len(xs) > 1 \
            else layers.reduce_sum(grads[0] * vs[0])
        hvps = gradients(s, xs)
    for x in xs:
        feed[f"v@{x.name}"] = rng.standard_normal(inputs[x.name].shape)
    wanted = [(x, h) for x, h in zip(xs, hvps) if h is not None]
    fetched = exe.run(main, feed=feed, fetch_list=[h for _, h in wanted], scope=scope)
    for (x, _), analytic in zip(wanted, fetched):
        numeric = numeric_gradient(main, feed, scope, s.name, x.name)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol * 10, atol=atol * 10,
                                   err_msg=f"second order: d s / d {x.name}")
    assert_makers_emit_what_they_declare(main)
    for x, h in zip(xs, hvps):
        if h is None:  # no second-order dependence: the numeric Hessian-vector product must vanish
            numeric = numeric_gradient(main, feed, scope, s.name, x.name)
            np.testing.assert_allclose(numeric, 0.0, atol=atol * 10, err_msg=f"second order of {x.name} is not zero")


def check_run_time_gradients(build, declared, fed, out_shape, rtol=1e-6):
    """Declare vars with ``declared`` shapes (-1 dims met at run time), feed ``fed`` arrays; each gradient has its
    input's run-time shape and matches finite differences, first and second order."""
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(n, shape, "float64") for n, shape in declared.items()]
        out = build(*vs)
        r = layers.data("r", list(out.shape), "float64")
        loss = layers.reduce_sum(out * r)
        grads = gradients(loss, vs)
        ws = [layers.data(f"w@{v.name}", list(v.shape), "float64") for v in vs]
        second = layers.sum([layers.reduce_sum(g * w) for g, w in zip(grads, ws)])
        hvps = gradients(second, vs)
    rng = np.random.default_rng(8)
    feed = dict(fed)
    feed["r"] = rng.standard_normal(out_shape)
    feed.update({f"w@{n}": rng.standard_normal(a.shape) for n, a in fed.items()})
    scope, exe = Scope(), Executor(check_types=True)
    got = exe.run(main, feed=feed, fetch_list=grads, scope=scope)
    for (n, a), g in zip(fed.items(), got):
        assert g.shape == a.shape, f"d loss / d {n} has shape {g.shape}, its input {a.shape}"
        np.testing.assert_allclose(g, numeric_gradient(main, feed, scope, loss.name, n), rtol=rtol, atol=1e-7)
    wanted = [(n, h) for n, h in zip(fed, hvps) if h is not None]
    got = exe.run(main, feed=feed, fetch_list=[h for _, h in wanted], scope=scope)
    for (n, _), h in zip(wanted, got):
        assert h.shape == fed[n].shape
        np.testing.assert_allclose(h, numeric_gradient(main, feed, scope, second.name, n), rtol=1e-5, atol=1e-6)
