"""Synthetic stand-ins for the book's data sets, written in the files' own formats, so the book scripts read them
through ``paddle.dataset`` exactly as they would read the real ones (no download here).

``write_uci_housing`` writes ``uci_housing/housing.data``: 506 rows of 13 raw features and a price that is a
fixed linear function of the normalized features plus noise. ``write_mnist`` writes MNIST's four gzipped IDX
files: 28 x 28 grey images scattered around one fixed pattern per digit (``DIGITS``), and their labels.
"""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

FEATURES = 13
ROWS = 506
TRUE_W = np.random.default_rng(13).uniform(-10, 10, FEATURES)
TRUE_B = 22.5
DIGITS = np.random.default_rng(10).integers(0, 256, (10, 28, 28)).astype(np.uint8)
"""One 28 x 28 grey image per digit: the pattern its synthetic samples scatter around."""


def write_uci_housing(home: Path) -> Path:
    """``home/uci_housing/housing.data``, whitespace-separated like the UCI file."""
    rng = np.random.default_rng(1)
    raw = rng.uniform(0, 1, (ROWS, FEATURES)) * rng.uniform(1, 100, FEATURES)
    normalized = (raw - raw.mean(0)) / (raw.max(0) - raw.min(0))
    price = normalized @ TRUE_W + TRUE_B + rng.normal(0, 0.5, ROWS)
    path = home / "uci_housing" / "housing.data"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, np.column_stack([raw, price]), fmt="%10.5f")
    return path


def _idx(path: Path, array: np.ndarray, magic: int) -> None:
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(f">{1 + array.ndim}I", magic, *array.shape) + array.astype(np.uint8).tobytes())


def write_mnist(home: Path, train: int = 600, test: int = 200) -> Path:
    """``home/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``."""
    folder = home / "mnist"
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, count, seed in (("train", train, 3), ("t10k", test, 4)):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 10, count)
        images = np.clip(DIGITS[labels] + rng.normal(0, 64, (count, 28, 28)), 0, 255).round()
        _idx(folder / f"{prefix}-images-idx3-ubyte.gz", images, 2051)
        _idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels, 2049)
    return folder
