"""The kernel of dropout, its masks drawn as every engine draws them (``shared/network``); lookup_table's is derived
from its ``compute`` (``derived``), batch_norm's is in ``normalization``."""
from __future__ import annotations

import numpy as np

from ...shared.network import dropout_mask, dropout_stream


def dropout(op):
    p, is_test = op.attr("p"), op.attr("is_test")
    stream = dropout_stream(op)  # one per compiled plan: a fixed seed gives the same masks run after run

    def run(x):
        if is_test or p == 0.0:
            return x, np.ones_like(x)
        mask = dropout_mask(stream, x.shape, p, x.dtype)
        return x * mask, mask

    return run


KERNELS = {"dropout": dropout}
