"""Variable sugar: indexing, comparisons, .sum(), .mean(), .T, .astype(), and what == means."""
import numpy as np
import pytest

from gradgen.framework import Executor
from gradgen.program import Program, Variable, layers, program_guard
from gradgen.program.errors import ProgramError

X = np.arange(24.0).reshape(2, 3, 4) - 7.0
KEYS = [(slice(None), slice(0, 2)), 1, -1, (0, 2), (Ellipsis, 1),
        (slice(None, None, -1), slice(None), slice(1, None, 2)),
        (None, 0), (slice(None), None, -2, slice(None, 1)), (slice(-100, 100),), (1, slice(3, 0, -1), Ellipsis),
        Ellipsis, (slice(None), slice(None), slice(None)), (slice(5, 7),), (0, 1, 2), (slice(None, None, 3), 2)]


def _values(build, feed, batch=False):
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, [-1] * batch + list(a.shape[batch:]), str(a.dtype)) for n, a in feed.items()]
        outs = build(*xs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return outs, Executor().run(main, feed=feed, fetch_list=outs)


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("batch", [False, True])
def test_indexing_matches_numpy(key, batch):
    (var,), (got,) = _values(lambda x: x[key], {"x": X}, batch)
    want = X[key]
    np.testing.assert_array_equal(got, want)
    assert len(var.shape) == want.ndim and all(d in (w, -1) for d, w in zip(var.shape, want.shape))
    if not batch:
        assert var.shape == want.shape


def test_indexing_with_an_int_variable():
    i, k = np.array([[1, 0], [1, 1]]), np.array(2, dtype=np.int32)
    (a, b, c, d), got = _values(lambda x, i, k: [x[i], x[:, i], x[:, ::-1][..., i], x[0][k]],
                                {"x": X, "i": i, "k": k})
    for g, w in zip(got, [X[i], X[:, i], X[:, ::-1][..., i], X[0][k]]):
        np.testing.assert_array_equal(g, w)
    assert a.shape == (2, 2, 3, 4) and b.shape == (2, 2, 2, 4) and c.shape == (2, 3, 2, 2) and d.shape == (4,)


@pytest.mark.parametrize("key,message", [
    ((0, 0, 0, 0), "4 indexes for 3 dims"), (2, "index 2 is out of range for axis 0"), (0.5, "cannot index with float"),
    ((Ellipsis, Ellipsis), "single ellipsis"), (slice(None, None, 0), "step cannot be zero"),
    ([0, 1], "cannot index with list"), (True, "cannot index with bool")])
def test_bad_indexes_are_clear_errors(key, message):
    with program_guard(Program(), Program()):
        x = layers.data("x", [2, 3, 4], "float64")
        with pytest.raises(ProgramError, match=message):
            x[key]


def test_a_variable_index_must_be_int_and_alone_among_int_indexes():
    with program_guard(Program(), Program()):
        x = layers.data("x", [2, 3, 4], "float64")
        i = layers.data("i", [2], "int64")
        with pytest.raises(ProgramError, match="must be int32 or int64"):
            x[x]
        with pytest.raises(ProgramError, match="only one"):
            x[i, i]
        with pytest.raises(ProgramError, match="cannot be combined with int indexes"):
            x[i, 0]


def test_comparisons_build_bool_vars():
    y = X[::-1] * 0.5
    outs, got = _values(lambda x, y: [x > 0, 0 < x, x <= y, x >= 1.5, y < x], {"x": X, "y": y})
    for var, g, w in zip(outs, got, [X > 0, 0 < X, X <= y, X >= 1.5, y < X]):
        assert isinstance(var, Variable) and var.dtype == "bool" and var.stop_gradient
        np.testing.assert_array_equal(g, w)


def test_equality_is_identity_so_variables_stay_usable_as_dict_keys():
    with program_guard(Program(), Program()):
        x = layers.data("x", [3], "float64")
        y = layers.data("y", [3], "float64")
        assert (x == x) is True and (x == y) is False and (x != y) is True
        assert {x: 1, y: 2}[y] == 2 and x in [y, x] and y not in {x}
        with pytest.raises(ProgramError, match="no truth value at build time.*layers.cond"):
            if x > 0:
                pass
        with pytest.raises(ProgramError, match="not iterable"):
            list(x)


def test_sum_mean_transpose_and_astype():
    outs, got = _values(lambda x: [x.sum(), x.sum(dim=1, keep_dim=True), x.mean(), x.mean(dim=[0, 2]), x.T,
                                   x.astype("float32"), x.astype("int64")], {"x": X})
    want = [X.sum(), X.sum(1, keepdims=True), X.mean(), X.mean((0, 2)), X.T, X.astype(np.float32), X.astype(np.int64)]
    for var, g, w in zip(outs, got, want):
        assert g.dtype == w.dtype and var.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12)
