"""Finite-difference checks, first and second order in float64, for every op issue 14 added or extended."""
import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from tests.grad.checking import check_op_gradients
from tests.ops.kernel_cases import POOLS

SHAPES = [(3,), (2, 3), (2, 1, 4), (0, 3)]


def away_from_zero(shape, seed=0, low=0.2, high=1.5):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def randn(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


UNARY = {
    "erf": layers.erf,
    "silu": layers.silu,
    "elu": layers.elu,
    "elu_alpha": lambda x: layers.elu(x, alpha=0.3),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, shape):
    check_op_gradients(UNARY[name], {"x": away_from_zero(shape, len(name))})


REDUCTIONS = [((2, 3), None, False), ((2, 3), 1, False), ((2, 3, 4), [0, 2], True), ((4,), 0, True),
              ((2, 1, 3), 1, False), ((3, 1), [-1, 0], False), ((2, 0, 3), 1, False), ((2, 0, 3), 0, True)]


@pytest.mark.parametrize("shape,dim,keep", [r for r in REDUCTIONS if r[:2] != ((2, 0, 3), 1)] + [((2, 0, 3), 2, False)],
                         ids=str)
def test_logsumexp(shape, dim, keep):
    """(Over no elements logsumexp is -inf, which the kernel cases check; a loss made of it is not differentiable.)"""
    check_op_gradients(lambda x: layers.logsumexp(x, dim=dim, keep_dim=keep), {"x": randn(shape) * 3})


@pytest.mark.parametrize("shape,dim,keep", REDUCTIONS, ids=str)
def test_reduce_prod(shape, dim, keep):
    check_op_gradients(lambda x: layers.reduce_prod(x, dim=dim, keep_dim=keep), {"x": away_from_zero(shape, 3)})


def _with_zeros(shape, zeros, seed=5):
    """Values away from 0, with ``zeros`` entries of each row along the last dim set to exactly 0."""
    x = away_from_zero(shape, seed, 0.5, 1.5)
    rows = x.reshape(-1, shape[-1])
    for r in range(rows.shape[0]):
        rows[r, np.random.default_rng(seed + r).permutation(shape[-1])[:zeros]] = 0.0
    return rows.reshape(shape)


@pytest.mark.parametrize("zeros", [1, 2, 3, 5])
@pytest.mark.parametrize("dim", [-1, None, [0, 2]], ids=str)
def test_reduce_prod_at_zeros(zeros, dim):
    """One zero: only it has a gradient (the product of the others); two or more: the first order vanishes but
    the Hessian does not (two zeros) -- dividing by x would give NaN or zero everywhere."""
    check_op_gradients(lambda x: layers.reduce_prod(x, dim=dim), {"x": _with_zeros((2, 3, 5), zeros)})


@pytest.mark.parametrize("zeros", [0, 1, 2, 3])
@pytest.mark.parametrize("dim", [[1], [], [0, 2]], ids=str)
def test_prod_others_at_zeros(zeros, dim):
    """reduce_prod's gradient op on its own: its gradient is the scan on dual numbers."""
    check_op_gradients(lambda x: append("prod_others", {"X": x}, {"dim": dim, "reduce_all": not dim}),
                       {"x": _with_zeros((2, 4, 3), zeros, seed=7)})


def test_reduce_prod_gradient_at_two_zeros_is_the_product_of_the_rest_in_the_second_order():
    x = np.array([0.0, 2.0, 0.0, 3.0])
    check_op_gradients(lambda x: layers.reduce_prod(x), {"x": x})


@pytest.mark.parametrize("shape", [(3, 4), (1, 4), (0, 3), (2, 1, 3)], ids=str)
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(axis, exclusive, reverse, shape):
    check_op_gradients(lambda x: layers.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse) ** 2.0,
                       {"x": randn(shape, 1)})


@pytest.mark.parametrize("shape,paddings,value", [((3,), [2, 1], 0.0), ((2, 3), [1, 0, 2, 3], 0.5),
                                                  ((2, 1, 2), [0, 0, 1, 1, 0, 2], -1.0), ((0, 2), [1, 1, 0, 1], 2.0)],
                         ids=str)
def test_pad(shape, paddings, value):
    check_op_gradients(lambda x: layers.pad(x, paddings, value) * layers.pad(x, paddings, value),
                       {"x": randn(shape, 2)})


@pytest.mark.parametrize("axes,starts,ends,strides", [([0], [0], [5], [2]), ([1], [-1], [-100], [-2]),
                                                      ([0, 1], [4, 1], [0, 6], [-3, 2]), ([1], [5], [0], [1])],
                         ids=str)
def test_strided_slice(axes, starts, ends, strides):
    check_op_gradients(lambda x: layers.slice(x, axes, starts, ends, strides) ** 3.0, {"x": randn((5, 6), 3)})


MATMULS = [((4,), (4,), False, False), ((4,), (4, 3), False, False), ((4,), (3, 4), False, True),
           ((2, 3, 4), (4,), False, False), ((4, 3), (4,), True, False), ((4,), (2, 1, 4, 3), True, False),
           ((2, 5, 4), (4,), False, True)]


@pytest.mark.parametrize("sx,sy,tx,ty", MATMULS, ids=str)
def test_matmul_with_vectors(sx, sy, tx, ty):
    check_op_gradients(lambda x, y: layers.matmul(x, y, tx, ty), {"x": randn(sx, 4), "y": randn(sy, 5)})


@pytest.mark.parametrize("k,axis,largest", [(2, -1, True), (1, 0, True), (3, -1, False), (4, 1, True)])
def test_top_k(k, axis, largest):
    x = np.random.default_rng(6).permutation(12).reshape(3, 4) * 0.3 + 0.05  # distinct values: no ties
    check_op_gradients(lambda x: layers.top_k(x, k, axis, largest)[0], {"x": x})


@pytest.mark.parametrize("axis,index,shape", [(0, [2, 0], (3, 2)), (1, [[1], [3]], (2, 4)), (0, [-1, 0, 1], (3, 2))],
                         ids=str)
def test_scatter(axis, index, shape):
    index = np.array(index)
    updates_shape = np.take(np.zeros(shape), index, axis=axis).shape
    check_op_gradients(lambda x, u, index: layers.scatter(x, index, u * u, axis=axis) ** 2.0,
                       {"x": randn(shape, 7), "u": randn(updates_shape, 8)}, extra_feed={"index": index})


@pytest.mark.parametrize("axis,index,shape", [(0, [2, 0, 2, 2], (3, 2)), (1, [[1, 1], [0, 1]], (2, 3))], ids=str)
def test_scatter_add_with_repeats(axis, index, shape):
    index = np.array(index)
    updates_shape = np.take(np.zeros(shape), index, axis=axis).shape
    check_op_gradients(lambda x, u, index: layers.scatter_add(x * x, index, u, axis=axis) ** 2.0,
                       {"x": randn(shape, 9), "u": randn(updates_shape, 10)}, extra_feed={"index": index})


def test_take_along_axis_with_repeats():
    check_op_gradients(lambda x, index: layers.take_along_axis(x, index, 1) ** 2.0, {"x": randn((2, 4), 11)},
                       extra_feed={"index": np.array([[3, 0, 3], [1, 1, 2]])})


CONV_T = [((1, 2, 3, 3), 3, 3, 1, 0, 1, 1, 0), ((2, 2, 2, 3), 2, 2, 2, 1, 1, 1, 1),
          ((1, 4, 2, 2), 2, (2, 3), 2, 0, 2, 2, 1),
          ((1, 2, 3, 2), 1, 2, 1, 1, 2, 1, 0)]


@pytest.mark.parametrize("shape,filters,k,stride,pad,dilation,groups,extra", CONV_T, ids=str)
def test_conv2d_transpose(shape, filters, k, stride, pad, dilation, groups, extra):
    k = (k, k) if isinstance(k, int) else k
    w_shape = (shape[1], filters // groups) + tuple(k)

    def build(x, w):
        return append("conv2d_transpose", {"Input": x, "Filter": w},
                      {"strides": [stride] * 2, "paddings": [pad] * 2, "dilations": [dilation] * 2,
                       "groups": groups, "output_padding": [extra] * 2}, out_slots=("Output",))

    check_op_gradients(build, {"x": randn(shape, 12), "w": randn(w_shape, 13)})


@pytest.mark.parametrize("kind,k,s,pads,exclusive,ceil_mode", POOLS, ids=str)
def test_pool2d_padding_modes(kind, k, s, pads, exclusive, ceil_mode):
    x = np.random.default_rng(14).permutation(60).reshape(1, 2, 5, 6) * 0.1  # distinct: max has no ties
    check_op_gradients(lambda x: layers.pool2d(x, k, kind, s, pads, exclusive, ceil_mode), {"x": x})


SUGAR = {
    "columns": lambda x: x[:, 0:2],
    "reversed_rows_of_one_column": lambda x: x[::-1, 1],
    "int_then_stride": lambda x: x[1, ::2],
    "ellipsis_newaxis": lambda x: x[..., None, -1],
    "transpose_sum_mean": lambda x: x.T * x.sum(dim=1) + x.mean(),
    "astype": lambda x: (x * x).astype("float64"),
    "index_var": lambda x, i: x[i][:, 1:] * x[:, 1:][i],
}


@pytest.mark.parametrize("name", sorted(SUGAR))
def test_variable_sugar_is_differentiable(name):
    extra = {"i": np.array([2, 0, 2])} if name == "index_var" else None
    check_op_gradients(SUGAR[name], {"x": randn((3, 4), 15)}, extra_feed=extra)


@pytest.mark.parametrize("zeros", [2, 3])
def test_reduce_prod_third_order_at_zeros(zeros):
    """With three zeros every first and second derivative vanishes; the third (the product of the rest, for the
    three zeros) does not: the scan keeps it, as it keeps every order."""
    x0 = _with_zeros((2, 5), zeros, seed=21)
    rng = np.random.default_rng(22)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 5], "float64")
        r, v, w = (layers.data(n, [2, 5] if n != "r" else [2], "float64") for n in ("r", "v", "w"))
        (g,) = gradients(layers.reduce_sum(layers.reduce_prod(x, dim=1) * r), [x])
        (h,) = gradients(layers.reduce_sum(g * v), [x])
        t = layers.reduce_sum(h * w)
        (third,) = gradients(t, [x])
    feed = {"x": x0, "r": rng.standard_normal(2), "v": rng.standard_normal((2, 5)), "w": rng.standard_normal((2, 5))}
    scope = Scope()
    (got,) = Executor().run(main, feed=feed, fetch_list=[third], scope=scope)
    want = numeric_gradient(main, feed, scope, t.name, "x")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(want).max() > 0.1  # the third order is really there to be found
