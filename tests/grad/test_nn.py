"""Finite-difference checks, first and second order, for softmax and the losses."""
import numpy as np
import pytest

from gradgen.program import layers

from .checking import check_op_gradients


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_family(op, axis):
    layer = getattr(layers, op)
    check_op_gradients(lambda x: layer(x, axis=axis), {"x": _x((3, 4, 2))})


@pytest.mark.parametrize("label_shape", [(4, 1), (4,)], ids=str)
def test_cross_entropy_hard_labels(label_shape):
    probs = np.random.default_rng(1).uniform(0.2, 1.0, (4, 5))
    labels = np.array([0, 3, 4, 1], dtype=np.int64).reshape(label_shape)
    check_op_gradients(lambda x, label: layers.cross_entropy(x, label), {"x": probs}, extra_feed={"label": labels})


def test_cross_entropy_soft_labels():
    rng = np.random.default_rng(2)
    check_op_gradients(lambda x, y: layers.cross_entropy(x, y, soft_label=True),
                       {"x": rng.uniform(0.2, 1.0, (3, 4)), "y": rng.uniform(0.0, 1.0, (3, 4))})


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5)], ids=str)
def test_softmax_with_cross_entropy_hard_labels(shape):
    labels = np.random.default_rng(3).integers(0, shape[-1], shape[:-1] + (1,))
    check_op_gradients(lambda x, label: layers.softmax_with_cross_entropy(x, label), {"x": _x(shape)},
                       extra_feed={"label": labels.astype(np.int64)})


def test_softmax_with_cross_entropy_soft_labels():
    rng = np.random.default_rng(4)
    y = rng.uniform(0.0, 1.0, (3, 4))
    check_op_gradients(lambda x, y: layers.softmax_with_cross_entropy(x, y, soft_label=True),
                       {"x": _x((3, 4)), "y": y / y.sum(axis=1, keepdims=True)})


def test_softmax_with_cross_entropy_when_the_softmax_output_is_used_too():
    labels = np.array([[1], [0], [2]], dtype=np.int64)

    def build(x, label):
        loss, softmax = layers.softmax_with_cross_entropy(x, label, return_softmax=True)
        return loss + layers.reduce_sum(layers.square(softmax), dim=1, keep_dim=True)

    check_op_gradients(build, {"x": _x((3, 4))}, extra_feed={"label": labels})


def test_sigmoid_cross_entropy_with_logits():
    rng = np.random.default_rng(5)
    check_op_gradients(layers.sigmoid_cross_entropy_with_logits,
                       {"x": _x((3, 4)) * 3, "label": rng.uniform(0, 1, (3, 4))})
