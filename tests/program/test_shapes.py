"""Compile-time shape and dtype inference for every layer, -1 dims and broadcasting included."""
import pytest

from gradgen.program import OpError, Program, layers, program_guard


def _build(fn, *specs):
    main = Program()
    with program_guard(main, Program()):
        vars_ = [layers.data(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
        out = fn(*vars_)
    return out


F = "float64"

CASES = [
    (lambda x, y: x + y, [([-1, 3], F), ([3], F)], (-1, 3)),
    (lambda x, y: x * y, [([2, 1, 4], F), ([3, 1], F)], (2, 3, 4)),
    (lambda x, y: layers.maximum(x, y), [([-1, 1], F), ([1, 5], F)], (-1, 5)),
    (lambda x, y: x @ y, [([-1, 4], F), ([4, 6], F)], (-1, 6)),
    (lambda x, y: layers.matmul(x, y, transpose_x=True), [([5, 2, 4], F), ([2, 3], F)], (5, 4, 3)),
    (lambda x: layers.relu(x), [([-1, 7], F)], (-1, 7)),
    (lambda x: layers.reduce_sum(x, dim=1), [([-1, 3, 4], F)], (-1, 4)),
    (lambda x: layers.reduce_mean(x, dim=[0, 2], keep_dim=True), [([2, 3, 4], F)], (1, 3, 1)),
    (lambda x: layers.reduce_max(x), [([2, 3], F)], ()),
    (lambda x: layers.mean(x), [([2, 3], F)], ()),
    (lambda x: layers.reshape(x, [0, -1]), [([6, 2, 3], F)], (6, 6)),
    (lambda x: layers.reshape(x, [-1, 3]), [([-1, 6], F)], (-1, 3)),
    (lambda x: layers.transpose(x, [2, 0, 1]), [([2, 3, 4], F)], (4, 2, 3)),
    (lambda x, y: layers.concat([x, y], axis=1), [([2, 3], F), ([2, 5], F)], (2, 8)),
    (lambda x, y: layers.concat([x, y], axis=0), [([-1, 3], F), ([2, 3], F)], (-1, 3)),
    (lambda x: layers.slice(x, [0, 1], [1, -2], [100, 6]), [([5, 6], F)], (4, 2)),
    (lambda x: layers.squeeze(x, [1]), [([2, 1, 3], F)], (2, 3)),
    (lambda x: layers.unsqueeze(x, [0, 2]), [([2, 3], F)], (1, 2, 1, 3)),
    (lambda x: layers.broadcast_to(x, [4, 2, 3]), [([2, 1], F)], (4, 2, 3)),
    (lambda x, y: layers.stack([x, y], axis=1), [([2, 3], F), ([2, 3], F)], (2, 2, 3)),
    (lambda x, i: layers.gather(x, i, axis=1), [([4, 5, 6], F), ([2, 3], "int64")], (4, 2, 3, 6)),
    (lambda c, x, y: layers.where(c, x, y), [([2, 1], "bool"), ([3], F), ([2, 3], F)], (2, 3)),
    (lambda x: layers.softmax(x, axis=0), [([-1, 3], F)], (-1, 3)),
    (lambda x, l: layers.cross_entropy(x, l), [([-1, 4], F), ([-1, 1], "int64")], (-1, 1)),
    (lambda x, y: layers.sigmoid_cross_entropy_with_logits(x, y), [([2, 3], F), ([2, 3], F)], (2, 3)),
    (lambda x: layers.cast(x, "float32"), [([2], F)], (2,)),
    (lambda x: layers.fill_constant([2, 3], "float32", 1.0), [([1], F)], (2, 3)),
    (lambda x: layers.zeros_like(x), [([-1, 2], F)], (-1, 2)),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_inferred_shape(i):
    fn, specs, shape = CASES[i]
    assert _build(fn, *specs).shape == shape


def test_comparisons_argmax_one_hot_are_typed_and_carry_no_gradient():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], F)
        ids = layers.data("ids", [-1], "int64")
        outs = [layers.less_than(x, x), layers.equal(x, x), layers.argmax(x, 1), layers.one_hot(ids, 5)]
    assert [(v.dtype, v.shape, v.stop_gradient) for v in outs] == [
        ("bool", (-1, 4), True), ("bool", (-1, 4), True), ("int64", (-1,), True), ("float32", (-1, 5), True)]


def test_softmax_with_cross_entropy_has_two_outputs():
    main = Program()
    with program_guard(main, Program()):
        logits = layers.data("logits", [-1, 10], F)
        label = layers.data("label", [-1, 1], "int64")
        loss, softmax = layers.softmax_with_cross_entropy(logits, label, return_softmax=True)
    assert loss.shape == (-1, 1) and softmax.shape == (-1, 10)


def test_split_returns_a_list_of_pieces():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [6, 2], F)
        parts = layers.split(x, 3)
    assert [p.shape for p in parts] == [(2, 2)] * 3


@pytest.mark.parametrize("fn,specs,message", [
    (lambda x, y: x + y, [([2, 3], F), ([4], F)], r"shapes \[2, 3\] and \[4\] do not broadcast"),
    (lambda x, y: x @ y, [([2, 3], F), ([4, 5], F)], "inner dimensions differ: 3 vs 4"),
    (lambda x, y: x + y, [([2], F), ([2], "float32")], "dtypes differ: float64 vs float32"),
    (lambda x: layers.reshape(x, [4, 4]), [([2, 3], F)], r"cannot reshape \[2, 3\]"),
    (lambda x: layers.transpose(x, [0, 0]), [([2, 3], F)], "repeated axis"),
    (lambda x: layers.squeeze(x, [0]), [([2, 3], F)], "axis 0 of X has size 2, not 1"),
    (lambda x: layers.relu(x), [([2], "int64")], "X must be a float tensor, got int64"),
])
def test_incompatible_inputs_name_block_op_vars_and_shapes(fn, specs, message):
    with pytest.raises(OpError, match=message) as err:
        _build(fn, *specs)
    text = str(err.value)
    assert "block 0, op #0" in text and "in0: " in text and "created at test_shapes.py:" in text


@pytest.mark.parametrize("build", [lambda x: layers.squeeze(x, [0]), lambda x: layers.slice(x, [0], [0], [1])],
                         ids=["squeeze", "slice"])
def test_a_scalar_has_no_axis_to_squeeze_or_slice(build):
    """A scalar's axis 0 means "nothing" to a reduction, but squeeze and slice would read its size: an OpError
    naming the op, not an IndexError from inside shape inference."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [], "float64")
        with pytest.raises(OpError, match=r"X is a scalar \(rank 0\): it has no axis 0"):
            build(x)
