"""Finite-difference checks, first and second order, for binary elementwise ops and matmul, with broadcasting."""
import numpy as np
import pytest

from gradgen.framework import gradients
from gradgen.program import Program, layers, program_guard

from .checking import check_op_gradients, check_run_time_gradients

BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 1, 4), (3, 1)), ((1,), (2, 3))]


def _pair(sx, sy, seed, positive=False):
    rng = np.random.default_rng(seed)
    if positive:
        return rng.uniform(0.5, 2.0, sx), rng.uniform(0.5, 2.0, sy)
    return rng.standard_normal(sx), rng.standard_normal(sy)


BINARY = {
    "add": (lambda x, y: x + y, False),
    "subtract": (lambda x, y: x - y, False),
    "multiply": (lambda x, y: x * y, False),
    "divide": (lambda x, y: x / y, True),
    "pow": (lambda x, y: layers.pow(x, y), True),
    "maximum": (layers.maximum, False),
    "minimum": (layers.minimum, False),
    "remainder": (lambda x, y: layers.remainder(x, y), False),
    "remainder_fmod": (lambda x, y: layers.remainder(x, y, fmod=True), False),
}


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradients(name, shapes):
    fn, positive = BINARY[name]
    x, y = _pair(*shapes, seed=len(name), positive=positive)
    check_op_gradients(fn, {"x": x, "y": y})


@pytest.mark.parametrize("tx", [False, True])
@pytest.mark.parametrize("ty", [False, True])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                    ((1, 3, 4), (2, 4, 5))], ids=str)
def test_matmul_gradients(shapes, tx, ty):
    sx, sy = shapes
    sx = sx[:-2] + sx[-2:][::-1] if tx else sx
    sy = sy[:-2] + sy[-2:][::-1] if ty else sy
    rng = np.random.default_rng(1)
    check_op_gradients(lambda x, y: layers.matmul(x, y, transpose_x=tx, transpose_y=ty),
                       {"x": rng.standard_normal(sx), "y": rng.standard_normal(sy)})


# x[..., k] @ y with y a matrix or vector: y's gradient is one 2-D product over x's folded batch dims
FOLDED = [((2, 3, 4), (4, 5), False), ((2, 3, 4), (5, 4), True), ((1, 1, 4), (4, 5), False),
          ((2, 1, 3, 4), (4, 2), False), ((2, 3, 4), (4,), False), ((0, 3, 4), (4, 5), False),
          ((2, 0, 4), (5, 4), True), ((3, 2, 4), (4, 1), False)]


@pytest.mark.parametrize("sx,sy,ty", FOLDED, ids=str)
def test_folded_matmul_gradients(sx, sy, ty):
    rng = np.random.default_rng(4)
    check_op_gradients(lambda x, y: layers.matmul(x, y, transpose_y=ty),
                       {"x": rng.standard_normal(sx), "y": rng.standard_normal(sy)})


@pytest.mark.parametrize("declared,fed", [([-1, 3, 4], (2, 3, 4)), ([-1, 3, 4], (0, 3, 4)), ([-1, 3, 4], (1, 3, 4)),
                                          ([-1, -1, 4], (2, 5, 4)), ([2, -1, -1], (2, 3, 4))], ids=str)
@pytest.mark.parametrize("sy,ty", [((4, 5), False), ((5, 4), True), ((4,), False)], ids=str)
def test_folded_matmul_gradients_with_minus_one_dims_met_at_run_time(declared, fed, sy, ty):
    rng = np.random.default_rng(5)
    out_shape = fed[:-1] + ((sy[0] if ty else sy[1]),) if len(sy) == 2 else fed[:-1]
    check_run_time_gradients(lambda x, y: layers.matmul(x, y, transpose_y=ty), {"x": declared, "y": list(sy)},
                             {"x": rng.standard_normal(fed), "y": rng.standard_normal(sy)}, out_shape)


def _backward_ops(sx, sy, tx=False, ty=False):
    main = Program()
    with program_guard(main, Program()):
        x, y = layers.data("x", sx, "float32"), layers.data("y", sy, "float32")
        gradients(layers.reduce_sum(layers.matmul(x, y, tx, ty)), [x, y])
    return [op for op in main.global_block().ops if op.role == "backward" and op.forward_op is not None
            and op.forward_op.type == "matmul"]


def test_the_weight_gradient_of_a_folded_product_is_one_2d_product_the_program_shows():
    ops = _backward_ops([-1, 128, 256], [256, 1024])
    assert [op.type for op in ops] == ["matmul", "reshape", "reshape", "matmul"]  # dX, then rows of x and dout
    assert [op.attr("shape") for op in ops[1:3]] == [[-1, 256], [-1, 1024]]
    block = ops[0].block
    assert block.var(ops[3].output("Out")[0]).shape == (256, 1024)
    assert block.var(ops[0].output("Out")[0]).shape == (-1, 128, 256)


@pytest.mark.parametrize("sx,sy,tx", [([-1, 4, 3], [4, 5], True), ([-1, 3, 4], [-1, 4, 5], False),
                                      ([-1, 3, 4], [1, 4, 5], False), ([-1, 3, -1], [-1, 5], False)], ids=str)
def test_products_that_cannot_fold_keep_the_batched_gradient(sx, sy, tx):
    """x transposed, y with batch dims (which may broadcast), or k unknown: y's gradient is summed back."""
    assert "reshape" not in [op.type for op in _backward_ops(sx, sy, tx)]


def test_matmul_of_a_var_with_itself_accumulates():
    rng = np.random.default_rng(2)
    check_op_gradients(lambda x: layers.matmul(x, x), {"x": rng.standard_normal((3, 3))})


def test_scalar_operands_on_either_side():
    rng = np.random.default_rng(3)
    check_op_gradients(lambda x: 2.0 - x * 3.0 + 1.0 / (x + 4.0), {"x": rng.uniform(0.5, 1.0, (2, 3))})
