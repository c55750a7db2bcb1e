"""Kernels of dropout (its masks drawn as every engine draws them: ``shared/network``) and lookup_table
(batch_norm's is in ``normalization``)."""
from __future__ import annotations

import numpy as np

from gradgen.program.ops.nn import first_out_of_range

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


def lookup_table(op):
    def run(w, ids):
        error = first_out_of_range(np.asarray(ids), w.shape[0], "id")  # numpy would read -1 as the last row
        if error is not None:
            raise error
        return np.take(w, ids, axis=0)

    return run


KERNELS = {"dropout": dropout, "lookup_table": lookup_table}
