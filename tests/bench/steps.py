"""The MLP training step of the bench as each system writes it, and its two GEMM floors.

``make_step(system, case)`` returns a function that runs one step of ``relu(x @ w1) @ w2`` with squared error and
plain SGD, fetching the loss, from the same data and weights in every system. The systems: gradgen (an
``Executor.run`` per step), the numpy loop as a user writes it (a function per step, default malloc), PyTorch
eager, JAX jit, PyTensor; and two floors that run the step's five matrix products alone into preallocated arrays,
through numpy (``numpy_gemms``) and through gradgen's chosen BLAS (``provider_gemms``, ``backend.numpy.blas.gemm``);
and gradgen's program compiled whole by inductor (``compiled_ops``, a bound, not an engine: ``whole_step_bound``).
Each maker imports its system only when called, so a process that times one system loads no other.
"""
from __future__ import annotations

import importlib

from typing import Callable

import numpy as np

CASES = {"seed-f64": (64, 1000, 100, 10, "float64"), "seed-f32": (64, 1000, 100, 10, "float32"),
         "large-f32": (512, 4096, 4096, 1000, "float32")}
"""Case name -> (batch, inputs, hidden, outputs, dtype)."""
LR = 1e-6


def _data(n, d_in, h, d_out, dtype):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, d_in)).astype(dtype), rng.standard_normal((n, d_out)).astype(dtype),
            (rng.standard_normal((d_in, h)) * 0.01).astype(dtype),
            (rng.standard_normal((h, d_out)) * 0.01).astype(dtype))


def mlp_program(x, y, w1, w2):
    """The bench's MLP training step as a gradgen program: (main, startup, loss, feed, values of the parameters).

    ``relu(x @ w1) @ w2``, summed squared error, SGD; the engine survey exports this same program to ONNX."""
    from gradgen.framework import optimizer
    from gradgen.program import Program, layers, program_guard

    dtype = x.dtype.name
    main, startup = Program(), Program()
    with program_guard(main, startup):
        xs = layers.data("x", [-1, x.shape[1]], dtype)
        ys = layers.data("y", [-1, y.shape[1]], dtype)
        p1 = layers.create_parameter(list(w1.shape), dtype, name="w1")
        p2 = layers.create_parameter(list(w2.shape), dtype, name="w2")
        loss = layers.reduce_sum(layers.square(layers.relu(xs @ p1) @ p2 - ys))
        optimizer.SGD(LR).minimize(loss)
    return main, startup, loss, {"x": x, "y": y}, {"w1": w1, "w2": w2}


def _gradgen(x, y, w1, w2, backend: str = "numpy"):
    from gradgen.framework import Executor, Scope

    main, startup, loss, feed, params = mlp_program(x, y, w1, w2)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    scope.update(params)
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def _numpy(x, y, w1, w2):
    def step():
        hidden = x @ w1
        h_relu = np.maximum(hidden, 0)
        diff = h_relu @ w2 - y
        loss = float(np.square(diff).sum())
        g = 2.0 * diff
        gw2 = h_relu.T @ g
        gh = g @ w2.T
        gh[hidden < 0] = 0
        w1[...] -= LR * (x.T @ gh)
        w2[...] -= LR * gw2
        return loss
    return step


def _products(x, y, w1, w2, matmul: Callable):
    """The step's five products (forward two, backward three) into preallocated arrays, each through
    ``matmul(a, trans_a, b, trans_b, out)``; a step returns the arrays."""
    n, h = x.shape[0], w1.shape[1]
    hidden, out, gw2 = np.empty((n, h), x.dtype), np.empty_like(y), np.empty_like(w2)
    gh, gw1, grad_out = np.empty((n, h), x.dtype), np.empty_like(w1), np.ones_like(y)

    def step():
        matmul(x, False, w1, False, hidden)
        matmul(hidden, False, w2, False, out)
        matmul(hidden, True, grad_out, False, gw2)
        matmul(grad_out, False, w2, True, gh)
        matmul(x, True, gh, False, gw1)
        return hidden, out, gw2, gh, gw1
    return step


def _numpy_gemms(x, y, w1, w2):
    """numpy's floor: the five products through ``np.matmul``."""
    return _products(x, y, w1, w2, lambda a, ta, b, tb, out: np.matmul(a.T if ta else a, b.T if tb else b, out=out))


def _provider_gemms(x, y, w1, w2):
    """gradgen's floor: the five products through the BLAS gradgen chose (``backend.numpy.blas``)."""
    from gradgen.framework.backend.numpy.blas import gemm

    return _products(x, y, w1, w2, lambda a, ta, b, tb, out: gemm(ta, tb, 1.0, a, b, 0.0, out))


def _torch(x, y, w1, w2):
    import torch

    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    p1, p2 = torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2).requires_grad_()

    def step():
        loss = ((torch.relu(xt @ p1) @ p2 - yt) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (p1, p2):
                p.sub_(LR * p.grad)
                p.grad = None
        return loss.item()
    return step


def _jax(x, y, w1, w2):
    import jax
    if x.dtype == np.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def loss_fn(ws, xb, yb):
        return jnp.sum((jnp.maximum(xb @ ws[0], 0) @ ws[1] - yb) ** 2)

    @jax.jit
    def update(ws, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(ws, xb, yb)
        return [w - LR * g for w, g in zip(ws, grads)], loss

    state = {"ws": [jnp.asarray(w1), jnp.asarray(w2)]}
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def step():
        state["ws"], loss = update(state["ws"], xj, yj)
        return float(loss)
    return step


def _pytensor(x, y, w1, w2):
    import pytensor
    import pytensor.tensor as pt

    xs, ys = pt.matrix("x", dtype=x.dtype.name), pt.matrix("y", dtype=x.dtype.name)
    s1, s2 = pytensor.shared(w1, "w1"), pytensor.shared(w2, "w2")
    loss = pt.sum(pt.sqr(pt.dot(pt.maximum(pt.dot(xs, s1), 0), s2) - ys))
    g1, g2 = pytensor.grad(loss, [s1, s2])
    lr = np.asarray(LR, x.dtype)
    fn = pytensor.function([xs, ys], loss, updates=[(s1, s1 - lr * g1), (s2, s2 - lr * g2)])
    return lambda: float(fn(x, y))


def _compiled_ops(x, y, w1, w2):
    """The gradgen program's ops as one function compiled by inductor (``torch.compile(fullgraph=True)``): each op
    by its own ``compute`` over torch (the torch engine's derived kernels), the products ``torch.matmul``, each with
    the finiteness flag an engine would need before taking ATen's product; its new weights fed back each step, as
    a run commits them. What compiling the whole step would reach (``whole_step_bound``); not a gradgen engine."""
    import torch
    from gradgen.framework import Executor, Scope
    from gradgen.framework.backend.torch.kernels import XP
    from gradgen.framework.backend.torch.kernels.derived import computed_kernel
    from gradgen.program.ops import OP_SCHEMAS

    main, startup, loss, feed, params = mlp_program(x, y, w1, w2)
    block = main.global_block()
    scope = Scope()
    Executor(backend="numpy").run(startup, scope=scope)
    flags: list = []

    def product(op):
        tx, ty = op.attr("transpose_x"), op.attr("transpose_y")

        def run(a, b):
            out = torch.matmul(a.mT if tx else a, b.mT if ty else b)
            flags.append(torch.isfinite(out).all())  # ATen's product is right only where no operand was inf or NaN
            return out
        return run

    steps = [(product(op) if op.type == "matmul" else computed_kernel(OP_SCHEMAS[op.type], XP)(op),
              tuple(op.input_arg_names), tuple(op.output_arg_names)) for op in block.ops]
    held = sorted({n for op in block.ops for n in op.input_arg_names if block.var(n).persistable})
    written = [n for n in held if any(n in op.output_arg_names for op in block.ops)]
    inputs, loss_name = [*feed, *held], loss.name  # (dynamo traces no method of a gradgen Variable)

    def whole(*values):
        env = dict(zip(inputs, values))
        flags.clear()
        for fn, ins, outs in steps:
            result = fn(*[env[n] for n in ins])
            env.update(zip(outs, (result,) if len(outs) == 1 else result))
        return (env[loss_name], *[env[n] for n in written], torch.stack(flags).all())

    compiled = torch.compile(whole, fullgraph=True, dynamic=False)
    state = {**{n: np.asarray(scope[n]) for n in held}, **params}

    def step():
        with torch.inference_mode():
            *values, ok = compiled(*(torch.from_numpy(a) for a in (*feed.values(), *(state[n] for n in held))))
        if not bool(ok):
            raise RuntimeError("a product met inf or NaN: an engine would run this step eagerly")
        state.update(zip(written, (v.numpy() for v in values[1:])))
        return float(values[0])

    return step


def _gradgen_on(backend: str, needs: str) -> Callable:
    """gradgen on a compiled ``backend`` (an extra, ``gradgen[xla]``): ImportError without the module ``needs``, as
    the other optional systems."""
    def make(x, y, w1, w2):
        importlib.import_module(needs)
        return _gradgen(x, y, w1, w2, backend=backend)
    return make


MAKERS = {"gradgen": _gradgen, "gradgen@xla": _gradgen_on("xla", "jax"), "gradgen@torch": _gradgen_on("torch", "torch"),
          "numpy": _numpy, "numpy_gemms": _numpy_gemms, "provider_gemms": _provider_gemms, "torch": _torch,
          "jax": _jax, "pytensor": _pytensor, "compiled_ops": _compiled_ops}


def case_data(case: str) -> tuple:
    """(x, y, w1, w2) of ``case`` (a key of ``CASES``): the same arrays for every system."""
    return _data(*CASES[case])


def make_step(system: str, case: str) -> Callable[[], object]:
    """One step of ``case`` (a key of ``CASES``) on ``system`` (a key of ``MAKERS``); ImportError when the
    system is not installed."""
    return MAKERS[system](*case_data(case))
