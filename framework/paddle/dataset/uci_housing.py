"""``paddle.dataset.uci_housing``: the Boston house prices of the UCI repository, as Paddle's reader gives them.

The file is ``housing.data``: 506 rows of 14 numbers, 13 features then the median price (in $1000s).
Each feature becomes ``(x - mean) / (max - min)`` over all rows; the first 80% of the rows train, the
rest test; a sample is ``(features[13], price[1])``, float64, as Paddle yields them.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ...data import DataError, Reader
from . import common

feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]
"""The 13 features, in column order."""

FILE = "housing.data"
TRAIN_RATIO = 0.8


def load_data(filename: str, feature_num: int = 14, ratio: float = TRAIN_RATIO) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows) of ``filename``, each row 13 normalized features and the price."""
    try:
        data = np.loadtxt(filename, dtype=np.float64, ndmin=2)
    except ValueError as e:
        raise DataError(f"paddle.dataset.uci_housing: {filename} is not rows of {feature_num} numbers: {e}") from None
    if data.shape[1] != feature_num or len(data) < 2:
        raise DataError(f"paddle.dataset.uci_housing: {filename} has {data.shape[0]} rows of {data.shape[1]} numbers; "
                        f"housing.data has 506 rows of {feature_num}")
    features = data[:, :-1]
    spread = features.max(axis=0) - features.min(axis=0)
    data[:, :-1] = (features - features.mean(axis=0)) / np.where(spread == 0, 1.0, spread)
    offset = int(len(data) * ratio)
    return data[:offset], data[offset:]


def _reader(part: int) -> Reader:
    (path,) = common.local_files("uci_housing", [FILE], "housing.data: 506 rows of 13 features and a price")
    rows = load_data(path)[part]

    def reader() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for row in rows:
            yield row[:-1], row[-1:]

    return reader


def train() -> Reader:
    """A reader of the 404 training samples ``(features, [price])``."""
    return _reader(0)


def test() -> Reader:
    """A reader of the 102 test samples ``(features, [price])``."""
    return _reader(1)


__all__ = ["feature_names", "FILE", "TRAIN_RATIO", "load_data", "train", "test"]
