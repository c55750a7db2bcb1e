"""A small convolutional classifier on synthetic images: is the bright bar horizontal or vertical?

Images are 1 x 8 x 8 with noise; class 0 holds a horizontal bar, class 1 a
vertical one, at a random position. conv(4 filters, 3x3) -> relu -> 2x2 max
pool -> fc(2) -> softmax cross-entropy, trained with Adam.
"""
from __future__ import annotations

import numpy as np

from gradgen.program import Program, layers, program_guard

from ...optimizer import Adam
from .base import Example

BATCH, SIZE = 32, 8


def bar_images(n: int = BATCH, seed: int = 0, dtype: str = "float32") -> dict[str, np.ndarray]:
    """``n`` noisy images with one bar each, and their labels (0 horizontal, 1 vertical)."""
    rng = np.random.default_rng(seed)
    images = rng.normal(0.0, 0.3, (n, 1, SIZE, SIZE))
    labels = rng.integers(0, 2, n)
    for i, (label, where) in enumerate(zip(labels, rng.integers(1, SIZE - 1, n))):
        if label == 0:
            images[i, 0, where, :] += 1.0
        else:
            images[i, 0, :, where] += 1.0
    return {"image": images.astype(dtype), "label": labels.reshape(n, 1).astype(np.int64)}


def cnn(seed: int = 0, dtype: str = "float32") -> Example:
    """Build the network; ``dtype`` float64 serves tests that compare runs to round-off."""
    main, startup = Program(), Program()
    startup.random_seed = seed
    with program_guard(main, startup):
        image = layers.data("image", [-1, 1, SIZE, SIZE], dtype)
        label = layers.data("label", [-1, 1], "int64")
        h = layers.conv2d(image, 4, 3, padding=1, act="relu", name="conv")
        h = layers.pool2d(h, 2, "max")
        h = layers.reshape(h, [-1, 4 * (SIZE // 2) ** 2])
        logits = layers.fc(h, 2, name="out")
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label), name="loss")
    return Example("cnn", "conv(4, 3x3) -> relu -> max pool -> fc(2) on 8x8 bar images, Adam lr 0.01 (float32)",
                   main, startup, loss, bar_images(BATCH, seed, dtype), 60, lambda: Adam(0.01))
