"""Finite-difference checks, first and second order, for reductions over every dim variant."""
import numpy as np
import pytest

from gradgen.program import layers

from .checking import check_op_gradients

DIMS = [None, 0, -1, [0, 2]]


def _distinct(shape, seed):
    """Values with no ties, so max/min have a unique winner and finite differences are valid."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) * 0.1 + \
        rng.uniform(0, 0.01, shape)


@pytest.mark.parametrize("keep_dim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reduction_gradients(op, dim, keep_dim):
    layer = getattr(layers, op)
    check_op_gradients(lambda x: layer(x, dim=dim, keep_dim=keep_dim), {"x": _distinct((2, 3, 4), 7)})


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 2)], ids=str)
def test_mean_gradients(shape):
    check_op_gradients(layers.mean, {"x": _distinct(shape, 3)})
