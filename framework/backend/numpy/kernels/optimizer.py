"""The gradient-norm kernels (global_norm, clip_by_global_norm: the norm summed in float64). The update rules state
their math in ``program/ops/optimizer.py`` and are derived (``derived``), each a new array per output (the run
commits them to the scope only when the whole run succeeded)."""
from __future__ import annotations

import numpy as np


def _norm(xs):
    return np.sqrt(sum(float(np.sum(np.square(x, dtype=np.float64))) for x in xs))


def global_norm(op):
    def run(*xs):
        return np.asarray(_norm(xs), dtype=xs[0].dtype)

    return run


def clip_by_global_norm(op):
    max_norm = op.attr("max_norm")

    def run(*xs):
        norm = _norm(xs)
        scale = max_norm / max(norm, max_norm)
        out = tuple((x * scale).astype(x.dtype, copy=False) for x in xs)
        return out[0] if len(out) == 1 else out

    return run


KERNELS = {"global_norm": global_norm, "clip_by_global_norm": clip_by_global_norm}
