"""``gradgen.framework.paddle``: the book's ``paddle.batch``, ``paddle.reader`` and ``paddle.dataset`` (issue 34,
item 5), on small files written here in the data sets' own formats."""
from __future__ import annotations

import gzip
import random
import struct
import threading

import numpy as np
import pytest

from gradgen.framework import data, fluid, paddle
from gradgen.framework.data import DataError


def _numbers(n: int):
    return lambda: iter(range(n))


def test_the_module_has_what_book_code_takes_from_import_paddle():
    assert paddle.batch is data.batch and paddle.fluid is fluid
    assert list(paddle.batch(_numbers(5), batch_size=2)()) == [[0, 1], [2, 3], [4]]


def test_shuffle_permutes_within_each_buffer_and_follows_pythons_random_seed():
    random.seed(7)
    first = list(paddle.reader.shuffle(_numbers(10), buf_size=4)())
    random.seed(7)
    again = list(paddle.reader.shuffle(_numbers(10), buf_size=4)())
    assert first == again != list(range(10))
    assert [sorted(first[i:i + 4]) for i in (0, 4, 8)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    with pytest.raises(DataError, match="buf_size must be positive"):
        paddle.reader.shuffle(_numbers(3), 0)


def test_buffered_gives_the_same_samples_and_raises_the_readers_error_in_place():
    assert list(paddle.reader.buffered(_numbers(50), size=3)()) == list(range(50))

    def failing():
        yield 1
        raise ValueError("disk gone")

    got = []
    with pytest.raises(ValueError, match="disk gone"):
        for sample in paddle.reader.buffered(failing, size=2)():
            got.append(sample)
    assert got == [1]
    with pytest.raises(DataError, match="size must be positive"):
        paddle.reader.buffered(_numbers(3), 0)


def test_leaving_a_buffered_loop_early_stops_its_thread():
    before = threading.active_count()
    for sample in paddle.reader.buffered(_numbers(10**6), size=2)():
        if sample == 3:
            break
    assert threading.active_count() == before


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(paddle.dataset.common, "DATA_HOME", str(tmp_path))
    return tmp_path


def test_uci_housing_normalizes_each_feature_and_splits_80_20_as_paddle(home):
    rows = np.arange(10 * 14, dtype=np.float64).reshape(10, 14) ** 1.5
    (home / "uci_housing").mkdir()
    np.savetxt(home / "uci_housing" / "housing.data", rows, fmt="%.6f")
    train = list(paddle.dataset.uci_housing.train()())
    test = list(paddle.dataset.uci_housing.test()())
    assert len(train) == 8 and len(test) == 2
    features, price = train[1]
    assert features.shape == (13,) and price.shape == (1,)
    columns = rows[:, :13]
    expected = (columns[1] - columns.mean(0)) / (columns.max(0) - columns.min(0))
    np.testing.assert_allclose(features, expected, rtol=1e-6)
    assert price[0] == pytest.approx(rows[1, 13], rel=1e-6)


def _idx(path, array: np.ndarray, magic: int) -> None:
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(f">{1 + array.ndim}I", magic, *array.shape) + array.astype(np.uint8).tobytes())


def test_mnist_reads_the_idx_files_and_scales_pixels_to_minus_one_one(home):
    folder = home / "mnist"
    folder.mkdir()
    images = np.zeros((3, 28, 28), np.uint8)
    images[1, 0, :2] = [255, 51]
    _idx(folder / "t10k-images-idx3-ubyte.gz", images, 2051)
    _idx(folder / "t10k-labels-idx1-ubyte.gz", np.array([7, 2, 1]), 2049)
    samples = list(paddle.dataset.mnist.test()())
    assert [label for _, label in samples] == [7, 2, 1] and all(type(label) is int for _, label in samples)
    pixels = samples[1][0]
    assert pixels.shape == (784,) and pixels.dtype == np.float32
    np.testing.assert_allclose(pixels[:3], [1.0, -0.6, -1.0], rtol=1e-6)

    _idx(folder / "t10k-labels-idx1-ubyte.gz", np.array([7, 2, 1]), 2051)  # an images header on labels
    with pytest.raises(DataError, match="not an IDX file of 1-dim labels"):
        paddle.dataset.mnist.test()


@pytest.mark.parametrize("dataset, files", [("uci_housing", "housing.data"),
                                            ("mnist", "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz")])
def test_a_data_set_not_on_this_machine_is_an_error_saying_which_files_to_put_where(home, dataset, files):
    with pytest.raises(DataError) as caught:
        getattr(paddle.dataset, dataset).train()
    message = str(caught.value)
    assert f"{files} not found in {home / dataset}" in message
    assert "gradgen downloads nothing" in message and "paddle.dataset.common.DATA_HOME" in message
