"""Issue 23's ops (tril, triu, flatten, einsum, sort, argsort): finite differences in float64, first and second
order with every pair of inputs; -1 dims met at run time; ties; declared dtypes. (Their build-time errors are in
test_behaviour.py's BAD table.)"""
import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
from gradgen.grad_makers.tangents import TANGENT_RULES
from gradgen.program import Program, layers, program_guard
from tests.grad.checking import check_op_gradients


def randn(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def distinct(shape, seed=0):
    """Values no two of which are equal (sort is differentiable there), not in sorted order."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.37 - n * 0.15


TRIANGLES = [((3, 4), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 2), ((1, 1), 0), ((2, 0, 3), 0), ((3, 2), -4)]


@pytest.mark.parametrize("shape,k", TRIANGLES, ids=str)
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangle(name, shape, k):
    op = getattr(layers, name)
    check_op_gradients(lambda x: op(x, k) ** 3.0, {"x": randn(shape, 1)})


FLATTENS = [((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -1), ((3,), 1),
            ((2, 0, 3), 1), ((1, 1), 1)]


@pytest.mark.parametrize("shape,axis", FLATTENS, ids=str)
def test_flatten(shape, axis):
    check_op_gradients(lambda x: layers.flatten(x * x, axis) ** 2.0, {"x": randn(shape, 2)})


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 2), (2, 2, 3)]),
    ("ij,jk", [(2, 3), (3, 2)]),  # implicit result: ik
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(3, 2)]),  # i is summed in the only operand: its gradient is dout broadcast along i
    ("ij,j->i", [(2, 3), (3,)]),
    ("ij,kl->ijkl", [(2, 1), (1, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),  # ellipses of different ranks, a size-1 dim broadcast
    ("...ij,jk", [(2, 2, 3), (3, 2)]),
    ("ij,jk->ik", [(2, 1), (3, 2)]),  # a size-1 named dim broadcast against 3
    ("ij,jk->ik", [(2, 3), (1, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("ab,bc,ca->", [(2, 3), (3, 2), (2, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 2, 2)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("ij,jk->ik", [(0, 2), (2, 3)]),
    ("i...->...", [(3, 2)]),
    ("ijk,k->", [(2, 1, 3), (3,)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUMS, ids=str)
def test_einsum(equation, shapes):
    names = "abc"[:len(shapes)]
    inputs = {n: randn(s, 3 + k) for k, (n, s) in enumerate(zip(names, shapes))}
    check_op_gradients(lambda *xs: layers.einsum(equation, *xs), inputs)


def test_einsum_of_one_var_twice_sums_both_gradients():
    """x used as both operands: its gradient is the sum of the two einsums (x^T x)."""
    check_op_gradients(lambda x: layers.einsum("ij,ik->jk", x, x), {"x": randn((3, 2), 5)})


SORTS = [((3, 4), -1, False), ((3, 4), 0, True), ((2, 3, 4), 1, True), ((5,), 0, False), ((3, 1), 1, True),
         ((2, 0, 3), 2, False), ((1, 4), 0, False)]


@pytest.mark.parametrize("shape,axis,descending", SORTS, ids=str)
def test_sort(shape, axis, descending):
    """x * y sorted: its Hessian has mixed partials in x and y (sort itself is piecewise linear)."""
    check_op_gradients(lambda x, y: layers.sort(x * y, axis, descending),
                       {"x": distinct(shape, 6), "y": np.random.default_rng(7).uniform(0.5, 2.0, shape)})


def test_sort_is_stable_both_ways_and_its_gradient_goes_to_the_positions_the_values_came_from():
    x = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    main = Program()
    with program_guard(main, Program()):
        xv = layers.data("x", [2, 5], "float64")
        up, down = layers.sort(xv), layers.sort(xv, descending=True)
        iup, idown = layers.argsort(xv), layers.argsort(xv, descending=True)
        r = layers.data("r", [2, 5], "float64")
        (dx,) = gradients(layers.reduce_sum(down * r), [xv])
    r_value = np.arange(10.0).reshape(2, 5) + 1
    got = Executor(check_types=True).run(main, feed={"x": x, "r": r_value}, fetch_list=[up, down, iup, idown, dx])
    np.testing.assert_array_equal(got[2], [[3, 0, 1, 2, 4], [0, 1, 2, 3, 4]])
    np.testing.assert_array_equal(got[3], [[1, 2, 4, 0, 3], [0, 1, 2, 3, 4]])
    np.testing.assert_array_equal(got[0], [[0, 1, 3, 3, 3], [2] * 5])
    np.testing.assert_array_equal(got[1], [[3, 3, 3, 1, 0], [2] * 5])
    assert got[2].dtype == got[3].dtype == np.int64
    # descending row 0 took x[1], x[2], x[4], x[0], x[3]: r's weights go back there, one each
    np.testing.assert_array_equal(got[4], [[4.0, 1.0, 2.0, 5.0, 3.0], [6.0, 7.0, 8.0, 9.0, 10.0]])


def test_argsort_has_no_gradient_and_sort_has_one():
    assert "argsort" in NON_DIFFERENTIABLE and "argsort" not in GRAD_MAKERS
    for op in ("tril", "triu", "flatten", "einsum", "sort"):
        assert op in GRAD_MAKERS and op in TANGENT_RULES, op
    with program_guard(Program(), Program()):
        x = layers.data("x", [3], "float64")
        i = layers.argsort(x)
        assert i.dtype == "int64" and i.stop_gradient


RUN_TIME = [  # builders over a [-1, 3, 4] input, and numpy references
    (lambda x: layers.tril(x, -1), lambda x: np.tril(x, -1)),
    (lambda x: layers.triu(x, 1), lambda x: np.triu(x, 1)),
    (lambda x: layers.flatten(x, 1), lambda x: x.reshape(x.shape[0], 12)),
    (lambda x: layers.flatten(x, 2), lambda x: x.reshape(x.shape[0] * 3, 4)),
    (lambda x: layers.einsum("bij,bkj->bik", x, x * x), lambda x: np.einsum("bij,bkj->bik", x, x * x)),
    (lambda x: layers.einsum("...j,...j->...", x, x), lambda x: np.einsum("...j,...j->...", x, x)),
    (lambda x: layers.einsum("bij->j", x), lambda x: np.einsum("bij->j", x)),
    (lambda x: layers.sort(x * x, 0, True), lambda x: -np.sort(-(x * x), axis=0)),
    (lambda x: layers.sort(x, 1), lambda x: np.sort(x, axis=1)),
]


@pytest.mark.parametrize("batch", [2, 1, 0])
@pytest.mark.parametrize("k", range(len(RUN_TIME)))
def test_minus_one_dims_met_at_run_time(k, batch):
    """Declared [-1, 3, 4]; fed batches of 2, 1 and 0: values equal numpy's and gradients finite differences."""
    build, ref = RUN_TIME[k]
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3, 4], "float64")
        out = build(x)
        r = layers.data("r", list(out.shape), "float64")
        loss = layers.reduce_sum(out * r)
        (dx,) = gradients(loss, [x])
    xv = distinct((batch, 3, 4), 9)
    want = ref(xv)
    feed = {"x": xv, "r": randn(want.shape, 10)}
    scope = Scope()
    got, grad = Executor(check_types=True).run(main, feed=feed, fetch_list=[out, dx], scope=scope)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, numeric_gradient(main, feed, scope, loss.name, "x"), rtol=1e-6, atol=1e-7)


def test_einsum_with_a_size_one_batch_met_at_run_time_sums_its_gradient_back():
    """x [-1, 2, 3] fed with batch 1 against y [4, 3, 2]: the '...' dim broadcasts and x's gradient sums it."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 2, 3], "float64")
        y = layers.data("y", [4, 3, 2], "float64")
        out = layers.einsum("...ij,...jk->...ik", x, y)
        loss = layers.reduce_sum(out * out)
        dx, dy = gradients(loss, [x, y])
    feed, scope = {"x": randn((1, 2, 3), 11), "y": randn((4, 3, 2), 12)}, Scope()
    got = Executor(check_types=True).run(main, feed=feed, fetch_list=[out, dx, dy], scope=scope)
    np.testing.assert_allclose(got[0], np.einsum("...ij,...jk->...ik", feed["x"], feed["y"]), rtol=1e-12)
    for name, g in zip("xy", got[1:]):
        np.testing.assert_allclose(g, numeric_gradient(main, feed, scope, loss.name, name), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_declared_dtype_is_the_computed_one(dtype):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], dtype)
        outs = [layers.tril(x), layers.triu(x, 1), layers.flatten(x, 0), layers.einsum("ij,kj->ik", x, x),
                layers.sort(x, descending=True), layers.argsort(x)]
    xv = (randn((2, 3)) * 4).astype(dtype)
    got = Executor(check_types=True).run(main, feed={"x": xv}, fetch_list=outs)
    assert [g.dtype for g in got] == [np.dtype(o.dtype) for o in outs]
    assert [o.dtype for o in outs] == [dtype] * 5 + ["int64"]
    np.testing.assert_allclose(got[3], np.einsum("ij,kj->ik", xv, xv), rtol=1e-6)


def test_fluid_argsort_gives_values_and_indices_as_paddle_1_did_and_flatten_is_there():
    from gradgen.framework import fluid

    main = Program()
    with program_guard(main, Program()):
        x = fluid.layers.data("x", [3], "float64")
        values, indices = fluid.layers.argsort(x, axis=1, descending=True)
        flat = fluid.layers.flatten(fluid.layers.tril(layers.unsqueeze(x, [1]) * layers.unsqueeze(x, [2])), axis=1)
    xv = np.array([[2.0, 5.0, 2.0], [0.0, -1.0, 3.0]])
    got = Executor(check_types=True).run(main, feed={"x": xv}, fetch_list=[values, indices, flat])
    np.testing.assert_array_equal(got[0], [[5.0, 2.0, 2.0], [3.0, 0.0, -1.0]])
    np.testing.assert_array_equal(got[1], [[1, 0, 2], [2, 0, 1]])
    np.testing.assert_array_equal(got[2], np.tril(xv[:, :, None] * xv[:, None, :]).reshape(2, 9))
    assert [op.type for op in main.global_block().ops].count("sort") == 1
