"""Finite-difference checks, first and second order, for every unary op."""
import numpy as np
import pytest

from gradgen.program import layers

from .checking import check_op_gradients

SHAPES = [(3,), (2, 3), (2, 1, 4)]


def _away_from_kinks(shape, seed, low=0.2, high=1.5):
    """Values whose magnitude stays away from 0 (kinks of relu, abs, ...), with random signs."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


UNARY = {
    "relu": (layers.relu, _away_from_kinks),
    "sigmoid": (layers.sigmoid, _away_from_kinks),
    "tanh": (layers.tanh, _away_from_kinks),
    "exp": (layers.exp, _away_from_kinks),
    "log": (layers.log, lambda s, k: np.random.default_rng(k).uniform(0.5, 2.0, s)),
    "sqrt": (layers.sqrt, lambda s, k: np.random.default_rng(k).uniform(0.5, 2.0, s)),
    "reciprocal": (layers.reciprocal, lambda s, k: np.random.default_rng(k).uniform(0.5, 2.0, s)),
    "square": (layers.square, _away_from_kinks),
    "abs": (layers.abs, _away_from_kinks),
    "sin": (layers.sin, _away_from_kinks),
    "cos": (layers.cos, _away_from_kinks),
    "gelu": (layers.gelu, _away_from_kinks),
    "softplus": (layers.softplus, _away_from_kinks),
    "leaky_relu": (lambda x: layers.leaky_relu(x, alpha=0.1), _away_from_kinks),
    "scale": (lambda x: layers.scale(x, scale=-2.5, bias=0.5), _away_from_kinks),
    "clip": (lambda x: layers.clip(x, -0.7, 0.9), lambda s, k: np.random.default_rng(k).choice(
        [-1.2, -0.5, 0.1, 0.6, 1.3], s) + np.random.default_rng(k + 1).uniform(-0.05, 0.05, s)),
    "pow": (lambda x: x ** 3.0, _away_from_kinks),
    "pow_fractional": (lambda x: x ** 1.5, lambda s, k: np.random.default_rng(k).uniform(0.5, 2.0, s)),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients(name, shape):
    layer, sample = UNARY[name]
    check_op_gradients(layer, {"x": sample(shape, len(name))})
