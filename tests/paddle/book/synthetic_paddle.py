"""What the book's ``import paddle`` provides, with synthetic data instead of downloads.

``batch`` and ``reader.shuffle`` are gradgen's reader helpers (shuffles
seeded, so the ports are deterministic); ``dataset.uci_housing`` yields 13
normalized features and a price, as Paddle's does; ``dataset.mnist`` yields
784 pixels in [-1, 1] and a digit, drawn around one fixed pattern per digit.
"""
from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np

from gradgen.framework import data

FEATURES = 13
TRUE_W = np.random.default_rng(13).uniform(-10, 10, FEATURES)
TRUE_B = 22.5
DIGITS = np.random.default_rng(10).integers(0, 256, (10, 28, 28)).astype(np.uint8)
"""One 28 x 28 grey image per digit: the pattern its synthetic samples scatter around."""


def _housing(count: int, seed: int):
    def reader():
        rng = np.random.default_rng(seed)
        for _ in range(count):
            x = rng.uniform(-0.5, 0.5, FEATURES).astype(np.float32)
            yield x, np.array([x @ TRUE_W + TRUE_B + rng.normal(0, 0.5)], np.float32)

    return reader


def _mnist(count: int, seed: int):
    def reader():
        rng = np.random.default_rng(seed)
        for _ in range(count):
            label = int(rng.integers(10))
            image = DIGITS[label].reshape(-1) / 255.0 * 2.0 - 1.0 + rng.normal(0, 0.5, 784)
            yield np.clip(image, -1, 1).astype(np.float32), label

    return reader


batch = data.batch
reader = SimpleNamespace(shuffle=partial(data.shuffle, seed=0))
dataset = SimpleNamespace(
    uci_housing=SimpleNamespace(train=lambda: _housing(404, 1), test=lambda: _housing(102, 2)),
    mnist=SimpleNamespace(train=lambda: _mnist(640, 3), test=lambda: _mnist(192, 4)),
)
