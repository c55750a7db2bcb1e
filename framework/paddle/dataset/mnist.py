"""``paddle.dataset.mnist``: the MNIST handwritten digits, as Paddle's reader gives them.

The files are MNIST's gzipped IDX files (``train-images-idx3-ubyte.gz`` and its labels, ``t10k-...`` for
the test set). A sample is ``(pixels, label)``: 784 float32 pixels scaled from 0..255 to -1..1, row by
row, and the digit as an int, as Paddle yields them.
"""
from __future__ import annotations

import gzip
import struct
from typing import Iterator

import numpy as np

from ...data import DataError, Reader
from . import common

IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
"""The first big-endian word of an IDX file of images (3 dims) and of labels (1 dim)."""

WHAT = ("MNIST's gzipped IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; scikit-learn's load_digits are 8x8 digits, "
        "not MNIST)")


def _idx(path: str, magic: int, dims: int) -> np.ndarray:
    """The uint8 array of IDX file ``path`` (gzipped), checked to be of kind ``magic`` with ``dims`` dims."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
        header = struct.unpack_from(f">{1 + dims}I", data)
    except (OSError, EOFError, struct.error) as e:
        raise DataError(f"paddle.dataset.mnist: {path} is not a gzipped IDX file: {e}") from None
    shape = header[1:]
    if header[0] != magic or len(data) < 4 * (1 + dims) + int(np.prod(shape)):
        raise DataError(f"paddle.dataset.mnist: {path} is not an IDX file of {dims}-dim "
                        f"{'images' if dims == 3 else 'labels'} (magic {header[0]}, {len(data)} bytes)")
    return np.frombuffer(data, np.uint8, count=int(np.prod(shape)), offset=4 * (1 + dims)).reshape(shape)


def reader_creator(image_filename: str, label_filename: str) -> Reader:
    """A reader of the samples of one pair of IDX files."""
    images = _idx(image_filename, IMAGES_MAGIC, 3)
    labels = _idx(label_filename, LABELS_MAGIC, 1)
    if len(images) != len(labels):
        raise DataError(f"paddle.dataset.mnist: {image_filename} has {len(images)} images but {label_filename} "
                        f"{len(labels)} labels")

    def reader() -> Iterator[tuple[np.ndarray, int]]:
        for image, label in zip(images, labels):
            yield image.reshape(-1).astype(np.float32) / 255.0 * 2.0 - 1.0, int(label)

    return reader


def _part(prefix: str) -> Reader:
    return reader_creator(*common.local_files("mnist", [f"{prefix}-images-idx3-ubyte.gz",
                                                        f"{prefix}-labels-idx1-ubyte.gz"], WHAT))


def train() -> Reader:
    """A reader of the 60,000 training samples ``(pixels[784], label)``."""
    return _part("train")


def test() -> Reader:
    """A reader of the 10,000 test samples ``(pixels[784], label)``."""
    return _part("t10k")


__all__ = ["IMAGES_MAGIC", "LABELS_MAGIC", "WHAT", "reader_creator", "train", "test"]
