"""Dropout's masks, drawn on the host with numpy for every engine: the numpy kernel draws them in the run, the xla
lowering through a host callback, from one stream per plan or compiled block, so both engines mask alike, run
after run, bit for bit."""
from __future__ import annotations

import numpy as np

__all__ = ["dropout_mask", "dropout_stream"]


def dropout_stream(op) -> np.random.Generator:
    """The PCG64 generator dropout op ``op``'s ``seed`` starts."""
    return np.random.Generator(np.random.PCG64(op.attr("seed")))


def dropout_mask(stream: np.random.Generator, shape, p: float, dtype) -> np.ndarray:
    """The next mask of ``shape`` from ``stream``: 0 where a unit drops (with probability ``p``), else 1 / (1 - p)."""
    return ((stream.random(shape) >= p) / (1.0 - p)).astype(dtype)
