"""Finite-difference checks, first and second order, for binary elementwise ops and matmul, with broadcasting."""
import numpy as np
import pytest

from gradgen.program import layers

from .checking import check_op_gradients

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


def test_matmul_of_a_var_with_itself_accumulates():
    rng = np.random.default_rng(2)
    check_op_gradients(lambda x: layers.matmul(x, x), {"x": rng.standard_normal((3, 3))})


def test_scalar_operands_on_either_side():
    rng = np.random.default_rng(3)
    check_op_gradients(lambda x: 2.0 - x * 3.0 + 1.0 / (x + 4.0), {"x": rng.uniform(0.5, 1.0, (2, 3))})
