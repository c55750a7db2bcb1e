"""DataLoader, DataFeeder and the batch / shuffle readers."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import DataFeeder, DataLoader
from gradgen.framework.data import DataError, batch, shuffle
from gradgen.program import Program, layers, program_guard


def _vars():
    with program_guard(Program(), Program()):
        img = layers.data("img", [None, 1, 2, 2], "float32")
        label = layers.data("label", [None, 1], "int64")
    return img, label


def _samples(n):
    return lambda: iter([(np.arange(4) + k, k) for k in range(n)])


def test_batch_keeps_order_and_the_short_tail_unless_dropped():
    assert [[s[1] for s in b] for b in batch(_samples(5), 2)()] == [[0, 1], [2, 3], [4]]
    assert [[s[1] for s in b] for b in batch(_samples(5), 2, drop_last=True)()] == [[0, 1], [2, 3]]
    assert list(batch(_samples(0), 3)()) == []


def test_shuffle_permutes_within_buffers_and_is_seeded():
    once = [s[1] for s in shuffle(_samples(10), buf_size=4, seed=3)()]
    assert sorted(once[:4]) == [0, 1, 2, 3] and sorted(once[4:8]) == [4, 5, 6, 7] and sorted(once[8:]) == [8, 9]
    assert once == [s[1] for s in shuffle(_samples(10), buf_size=4, seed=3)()]
    assert sorted(once) == list(range(10)) and once != list(range(10))


def test_feeder_stacks_samples_into_the_declared_shapes_and_dtypes():
    img, label = _vars()
    feed = DataFeeder(feed_list=[img, label], place="cpu").feed([(np.arange(4), 3), (np.ones(4), 7)])
    assert feed["img"].shape == (2, 1, 2, 2) and feed["img"].dtype == np.float32
    assert feed["label"].tolist() == [[3], [7]] and feed["label"].dtype == np.int64


@pytest.mark.parametrize("minibatch,message", [
    ([(np.arange(4),)], "sample 0 has 1 entries, but the feeder feeds 2 vars"),
    ([(np.arange(3), 1)], r"1 samples of 3 values each cannot fill the declared shape \[-1, 1, 2, 2\]"),
    ([(np.arange(4), 1), (np.arange(5), 2)], "do not stack"),
])
def test_feeder_errors(minibatch, message):
    img, label = _vars()
    with pytest.raises(DataError, match=message):
        DataFeeder([img, label]).feed(minibatch)


def test_loader_over_arrays_covers_every_row_once_per_pass_and_reshuffles():
    xs, ys = np.arange(10.0).reshape(10, 1), np.arange(10)
    loader = DataLoader({"x": xs, "y": ys}, batch_size=4, shuffle=True, seed=0)
    assert len(loader) == 3
    passes = []
    for _ in range(2):
        feeds = list(loader)
        assert [len(f["y"]) for f in feeds] == [4, 4, 2]
        assert all(np.array_equal(f["x"][:, 0], f["y"]) for f in feeds)  # rows stay together
        passes.append(np.concatenate([f["y"] for f in feeds]))
        assert sorted(passes[-1]) == list(range(10))
    assert not np.array_equal(passes[0], passes[1])
    again = [f["y"] for f in DataLoader({"x": xs, "y": ys}, batch_size=4, shuffle=True, seed=0)]
    assert np.array_equal(np.concatenate(again), passes[0])


def test_loader_without_shuffle_and_with_drop_last_and_zero_rows():
    ys = np.arange(5)
    assert [f["y"].tolist() for f in DataLoader({"y": ys}, batch_size=2, drop_last=True)] == [[0, 1], [2, 3]]
    empty = DataLoader({"y": np.zeros((0, 3))}, batch_size=2)
    assert len(empty) == 0 and list(empty) == []


def test_loader_over_a_reader_feeds_the_vars():
    img, label = _vars()
    feeds = list(DataLoader(_samples(5), batch_size=2, shuffle=True, seed=1, feed_list=[img, label]))
    assert [f["label"].shape for f in feeds] == [(2, 1), (2, 1), (1, 1)]
    with pytest.raises(TypeError, match="has no length"):  # len()'s protocol, which list() relies on
        len(DataLoader(_samples(3), feed_list=[img, label]))
    assert sorted(np.concatenate([f["label"][:, 0] for f in feeds]).tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("make,message", [
    (lambda: DataLoader({"x": np.zeros(3), "y": np.zeros(4)}), "of one length"),
    (lambda: DataLoader({"x": np.float64(1.0)}), "non-scalar"),
    (lambda: DataLoader([1, 2, 3]), "a mapping of arrays or a reader"),
    (lambda: DataLoader(_samples(3)), "needs feed_list"),
    (lambda: DataLoader({"x": np.zeros(3)}, batch_size=0), "batch_size must be positive"),
    (lambda: DataFeeder(["img"]), "needs Variables"),
])
def test_loader_errors(make, message):
    with pytest.raises(DataError, match=message):
        make()
