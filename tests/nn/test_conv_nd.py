"""1-D and 3-D convolution, transposed convolution and (dilated) pooling: forward against naive tap loops,
gradients first and second order against finite differences, run-time batch sizes (unknown and zero)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from gradgen.program.layers.helper import append
from tests.grad.checking import check_op_gradients


def naive_conv(x, w, stride, pad, dilation, groups):
    """Cross-correlation as a sum over kernel taps, each one einsum over channels (any number of spatial dims)."""
    dims = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
           zip(x.shape[2:], w.shape[2:], stride, pad, dilation)]
    o, cg = w.shape[:2]
    result = np.zeros((x.shape[0], o, *out))
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * (o // groups):(g + 1) * (o // groups)]
        for at in np.ndindex(*w.shape[2:]):
            view = xs[(slice(None), slice(None)) + tuple(slice(i * d, i * d + s * (m - 1) + 1, s) for i, d, s, m in
                                                         zip(at, dilation, stride, out))]
            result[:, g * (o // groups):(g + 1) * (o // groups)] += np.einsum(
                "nc...,oc->no...", view, ws[(slice(None), slice(None)) + at])
    assert dims == len(out)
    return result


def naive_pool(x, k, stride, pads, dilation, kind, exclusive=True):
    """Pooling window by window; ``pads`` (before, after) per dim."""
    out = [(n + pads[2 * i] + pads[2 * i + 1] - (kk - 1) * d - 1) // s + 1 for i, (n, kk, s, d) in
           enumerate(zip(x.shape[2:], k, stride, dilation))]
    result = np.zeros(x.shape[:2] + tuple(out))
    for pos in np.ndindex(*out):
        taps = []
        for at in np.ndindex(*k):
            idx = [p * s - pads[2 * i] + a * d for i, (p, s, a, d) in enumerate(zip(pos, stride, at, dilation))]
            if all(0 <= j < n for j, n in zip(idx, x.shape[2:])):
                taps.append(x[(slice(None), slice(None)) + tuple(idx)])
        stack = np.stack(taps)
        if kind == "max":
            result[(slice(None), slice(None)) + pos] = stack.max(0)
        else:
            result[(slice(None), slice(None)) + pos] = stack.sum(0) / (len(taps) if exclusive else np.prod(k))
    return result


def _conv_attrs(dims, s, p, d, g):
    return {"strides": [s] * dims, "paddings": [p] * dims, "dilations": [d] * dims, "groups": g}


CONV_CASES = [  # (x shape, filters, kernel, stride, padding, dilation, groups)
    ((2, 3, 7), 4, (3,), 1, 0, 1, 1),
    ((1, 4, 9), 2, (2,), 2, 1, 2, 2),
    ((2, 2, 1), 3, (1,), 1, 0, 1, 1),  # size-1 length and kernel
    ((1, 2, 4, 3, 4), 2, (2, 2, 3), 1, 1, 1, 1),
    ((2, 4, 5, 4, 1), 2, (3, 2, 1), 2, 0, 1, 2),
    ((1, 1, 5, 5, 3), 1, (2, 2, 1), 1, 1, 2, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_matches_a_naive_tap_loop_and_finite_differences(case):
    xs, f, k, s, p, d, g = case
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal((f, xs[1] // g) + k)
    attrs = _conv_attrs(len(k), s, p, d, g)
    main = Program()
    with program_guard(main, Program()):
        out = append("conv2d", {"Input": layers.data("x", list(xs), "float64"),
                                "Filter": layers.data("w", list(w.shape), "float64")}, attrs, out_slots=("Output",))
    (got,) = Executor().run(main, feed={"x": x, "w": w}, fetch_list=[out], scope=Scope())
    assert got.shape == out.shape
    np.testing.assert_allclose(got, naive_conv(x, w, [s] * len(k), [p] * len(k), [d] * len(k), g), rtol=1e-10,
                               atol=1e-12)
    check_op_gradients(lambda x, w: append("conv2d", {"Input": x, "Filter": w}, attrs, out_slots=("Output",)),
                       {"x": x, "w": w})


TRANSPOSE_CASES = [  # (x shape, filters, kernel, stride, padding, dilation, groups, output_padding)
    ((1, 2, 4), 3, (3,), 2, 1, 1, 1, 1),
    ((2, 4, 3), 2, (2,), 1, 0, 2, 2, 0),
    ((1, 2, 2, 3, 2), 2, (2, 1, 2), 2, 0, 1, 1, 1),
    ((1, 2, 3, 2, 2), 4, (2, 2, 2), 1, 1, 1, 2, 0),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=str)
def test_conv_transpose_is_the_adjoint_of_conv_and_matches_finite_differences(case):
    xs, f, k, s, p, d, g, e = case
    dims, rng = len(k), np.random.default_rng(4)
    x, w = rng.standard_normal(xs), rng.standard_normal((xs[1], f // g) + k)
    attrs = {**_conv_attrs(dims, s, p, d, g), "output_padding": [e] * dims}
    main = Program()
    with program_guard(main, Program()):
        out = append("conv2d_transpose", {"Input": layers.data("x", list(xs), "float64"),
                                          "Filter": layers.data("w", list(w.shape), "float64")}, attrs,
                     out_slots=("Output",))
    (got,) = Executor().run(main, feed={"x": x, "w": w}, fetch_list=[out], scope=Scope())
    y = rng.standard_normal(got.shape)  # <T(W)^T x, y> = <x, conv(y, W)>
    conv_y = naive_conv(y, w, [s] * dims, [p] * dims, [d] * dims, g)
    np.testing.assert_allclose(np.vdot(got, y), np.vdot(x, conv_y), rtol=1e-10)
    check_op_gradients(lambda x, w: append("conv2d_transpose", {"Input": x, "Filter": w}, attrs,
                                           out_slots=("Output",)), {"x": x, "w": w})


POOL_CASES = [  # (x shape, ksize, stride, paddings (before, after per dim), dilation, ceil_mode)
    ((2, 2, 7), (3,), (2,), (1, 1), (1,), False),
    ((1, 2, 9), (2,), (1,), (1, 0), (3,), False),
    ((1, 2, 8), (3,), (2,), (0, 0), (2,), True),
    ((1, 2, 4, 5, 4), (2, 2, 2), (2, 2, 2), (0, 0, 1, 1, 0, 0), (1, 1, 1), False),
    ((1, 1, 5, 4, 6), (2, 2, 3), (1, 2, 1), (1, 0, 0, 0, 1, 1), (2, 1, 2), False),
    ((1, 2, 3, 1, 3), (2, 1, 2), (1, 1, 2), (0, 0, 0, 0, 0, 0), (1, 1, 1), True),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pooling_forward_and_gradients(case, kind):
    xs, k, s, pads, d, ceil = case
    # distinct values, so every window has one maximum and finite differences are valid
    x = np.random.default_rng(5).permutation(np.arange(np.prod(xs), dtype=np.float64)).reshape(xs) * 0.1
    attrs = {"pooling_type": kind, "ksize": list(k), "strides": list(s), "paddings": list(pads),
             "dilations": list(d), "ceil_mode": ceil, "exclusive": True}
    main = Program()
    with program_guard(main, Program()):
        out = append("pool2d", {"X": layers.data("x", list(xs), "float64")}, attrs)
    (got,) = Executor().run(main, feed={"x": x}, fetch_list=[out], scope=Scope())
    if not ceil:
        np.testing.assert_allclose(got, naive_pool(x, k, s, pads, d, kind), rtol=1e-12)
    else:  # a ceil-mode window reaching past the input: compare against the same input padded by what it reaches
        far = [max(0, (o - 1) * st + (kk - 1) * dl + 1 - n) for o, st, kk, dl, n in zip(got.shape[2:], s, k, d, xs[2:])]
        ref_pads = [v for f in far for v in (0, f)]
        assert got.shape == naive_pool(x, k, s, ref_pads, d, kind).shape
        np.testing.assert_allclose(got, naive_pool(x, k, s, ref_pads, d, kind), rtol=1e-12)
    check_op_gradients(lambda v: append("pool2d", {"X": v}, attrs), {"x": x})


def test_layers_build_1d_and_3d_nets_with_a_batch_size_met_at_run_time():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        seq = layers.data("seq", [-1, 2, 9], "float64")
        h1 = layers.pool1d(layers.conv1d(seq, 3, 3, padding=1, act="tanh", name="c1"), 2, "max", dilation=2)
        h1 = layers.conv1d_transpose(h1, 2, 2, stride=2, name="t1")
        vol = layers.data("vol", [-1, 1, 4, 4, 4], "float32")
        h3 = layers.pool3d(layers.conv3d(vol, 2, (2, 3, 3), padding=(0, 1, 1), name="c3"), 2, "avg")
        h3 = layers.conv3d_transpose(h3, 1, 2, stride=2, name="t3")
    assert h1.shape == (-1, 2, 8) and h3.shape == (-1, 1, 2, 4, 4)
    assert {op.type for op in main.global_block().ops} >= {"conv2d", "conv2d_transpose", "pool2d"}
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    assert scope["c1.w"].shape == (3, 2, 3) and scope["c3.w"].shape == (2, 1, 2, 3, 3)
    assert scope["t1.w"].shape == (3, 2, 2) and scope["t3.w"].shape == (2, 1, 2, 2, 2)
    for batch in (3, 0):
        feed = {"seq": np.ones((batch, 2, 9)), "vol": np.ones((batch, 1, 4, 4, 4), np.float32)}
        a, b = exe.run(main, feed=feed, fetch_list=[h1, h3], scope=scope)
        assert a.shape == (batch, 2, 8) and b.shape == (batch, 1, 2, 4, 4)
        assert a.dtype == np.float64 and b.dtype == np.float32  # the declared dtype is the computed one


@pytest.mark.parametrize("build,message", [
    (lambda x: layers.conv1d(x, 2, 3), "conv1d needs NCL input"),
    (lambda x: append("conv2d", {"Input": layers.reshape(x, [1, 2, 2, 1]), "Filter": x}, {}, out_slots=("Output",)),
     "all of one rank"),
    (lambda x: layers.pool1d(layers.reshape(x, [1, 1, 4]), 2, padding=[1, 1, 1]),
     "padding \\(or two: before, after\\) must be an int or one"),
    (lambda x: layers.pool1d(layers.reshape(x, [1, 1, 4]), 2, padding=2), "smaller than ksize"),
    (lambda x: append("pool2d", {"X": layers.reshape(x, [1, 1, 2, 2, 1])}, {"ksize": [1, 1]}),
     "ksize must be three ints \\(one per spatial dim\\)"),
])
def test_wrong_ranks_and_attrs_are_refused_by_name(build, message):
    with program_guard(Program(), Program()):
        x = layers.data("x", [2, 2], "float64")
        with pytest.raises(ProgramError, match=message):
            build(x)


@pytest.mark.parametrize("build,declared,shape,out", [
    (lambda x, w: append("conv2d", {"Input": x, "Filter": w}, _conv_attrs(1, 2, 1, 1, 1), out_slots=("Output",)),
     [-1, 2, -1], (2, 2, 7), (2, 3, 4)),
    (lambda x, w: append("conv2d_transpose", {"Input": x, "Filter": w},
                         {**_conv_attrs(3, 2, 0, 1, 1), "output_padding": [1, 0, 0]}, out_slots=("Output",)),
     [1, 2, -1, 2, -1], (1, 2, 2, 2, 3), (1, 3, 5, 4, 6)),
])
def test_gradients_of_spatial_sizes_met_at_run_time(build, declared, shape, out):
    from tests.grad.checking import check_run_time_gradients

    rng = np.random.default_rng(6)
    w = rng.standard_normal((3, 2, 2) if len(shape) == 3 else (2, 3, 2, 2, 2))
    check_run_time_gradients(build, {"x": declared, "w": list(w.shape)}, {"x": rng.standard_normal(shape), "w": w},
                             out)


def test_pooling_gradients_of_spatial_sizes_met_at_run_time():
    from tests.grad.checking import check_run_time_gradients

    x = np.random.default_rng(7).permutation(60).reshape(1, 2, 5, 2, 3) * 0.1  # distinct: max has no ties
    attrs = {"pooling_type": "max", "ksize": [2, 1, 2], "strides": [1, 1, 1], "paddings": [1, 0, 0],
             "dilations": [2, 1, 1]}
    check_run_time_gradients(lambda v: append("pool2d", {"X": v}, attrs), {"x": [-1, 2, -1, 2, -1]}, {"x": x},
                             (1, 2, 5, 2, 2))
