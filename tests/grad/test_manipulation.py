"""Finite-difference checks, first and second order, for ops that move elements."""
import numpy as np
import pytest

from gradgen.program import layers

from .checking import check_op_gradients


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("shape,target", [((2, 3, 4), [6, 4]), ((2, 3, 4), [4, -1]), ((6,), [2, 1, 3]),
                                          ((2, 3), [0, 3, 1])], ids=str)
def test_reshape(shape, target):
    check_op_gradients(lambda x: layers.reshape(x, target), {"x": _x(shape)})


@pytest.mark.parametrize("perm", [[1, 0], [2, 0, 1], [0, 2, 1]], ids=str)
def test_transpose(perm):
    check_op_gradients(lambda x: layers.transpose(x, perm), {"x": _x([2, 3, 4][:len(perm)])})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    a, b = _x((2, 3, 2), 1), _x((2, 3, 2), 2)
    shape_b = list(b.shape)
    shape_b[axis] = 1
    check_op_gradients(lambda x, y: layers.concat([x, y, x], axis=axis), {"x": a, "y": _x(shape_b, 3)})


@pytest.mark.parametrize("sections,axis", [(3, 0), ([1, 2], 1), (2, -1)], ids=str)
def test_split_with_every_piece_used(sections, axis):
    def build(x):
        pieces = layers.split(x, sections, axis=axis)
        return layers.sum([layers.reduce_sum(p * float(i + 1)) * 1.0 for i, p in enumerate(pieces)])

    check_op_gradients(build, {"x": _x((3, 3, 2))})


def test_split_with_an_unused_piece_zero_fills_its_gradient():
    def build(x):
        first, _, third = layers.split(x, 3, axis=0)
        return first * third

    check_op_gradients(build, {"x": _x((3, 2))})


@pytest.mark.parametrize("axes,starts,ends", [([0], [1], [3]), ([1, 2], [0, -2], [2, 100]), ([-1], [-3], [-1])],
                         ids=str)
def test_slice(axes, starts, ends):
    check_op_gradients(lambda x: layers.slice(x, axes, starts, ends), {"x": _x((4, 3, 4))})


@pytest.mark.parametrize("axes", [[1], [], [1, 3]], ids=str)
def test_squeeze(axes):
    check_op_gradients(lambda x: layers.squeeze(x, axes), {"x": _x((2, 1, 3, 1))})


@pytest.mark.parametrize("axes", [[0], [1, 3], [-1]], ids=str)
def test_unsqueeze(axes):
    check_op_gradients(lambda x: layers.unsqueeze(x, axes), {"x": _x((2, 3))})


@pytest.mark.parametrize("shape", [[3, 1], [4], [2, 3, 4]], ids=str)
def test_broadcast_to(shape):
    x = _x((3, 1) if len(shape) == 2 else (1,) if len(shape) == 1 else (3, 1))
    check_op_gradients(lambda v: layers.broadcast_to(v, [2, 3, 4] if len(shape) == 3 else [3, 5]
                                                     if len(shape) == 2 else [4]), {"x": x})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(axis):
    check_op_gradients(lambda x, y: layers.stack([x, y, x], axis=axis), {"x": _x((2, 3), 1), "y": _x((2, 3), 2)})


@pytest.mark.parametrize("axis,index", [(0, [0, 2, 2, 1]), (1, [[1, 0], [2, 2]]), (-1, [3])], ids=str)
def test_gather_with_repeated_indices(axis, index):
    idx = np.array(index, dtype=np.int64)
    check_op_gradients(lambda x, index: layers.gather(x, index, axis=axis), {"x": _x((3, 3, 4))},
                       extra_feed={"index": idx})


def test_sum_of_several_vars():
    check_op_gradients(lambda x, y: layers.sum([x, y, x]), {"x": _x((2, 3), 1), "y": _x((2, 3), 2)})


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (3, 4))], ids=str)
def test_where(shapes):
    sx, sy = shapes
    cond = np.random.default_rng(4).random(np.broadcast_shapes(sx, sy)) > 0.5
    check_op_gradients(lambda x, y, cond: layers.where(cond, x, y), {"x": _x(sx, 1), "y": _x(sy, 2)},
                       extra_feed={"cond": cond})


def test_assign_and_cast():
    check_op_gradients(lambda x: layers.cast(layers.assign(x), "float64") * 2.0, {"x": _x((2, 3))})
