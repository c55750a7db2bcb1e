"""The lowering of ``dropout`` (``backend/numpy/kernels/network.py``; lookup_table's, batch norm's and layer norm's
are derived). Training dropout draws its masks on the host as the numpy kernel
draws them (``shared/network``), so both engines mask alike."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from ...shared.network import dropout_mask, dropout_stream

__all__ = ["LOWERINGS"]


def _dropout(op, ctx):
    """In inference (or with p 0) the identity and a mask of ones. In training, the mask is drawn on the host,
    once per run, from a PCG64 stream seeded as the numpy kernel's (``shared/network``), so the
    masks are the numpy backend's, run after run (XLA's own generators could not give them). The draw is an
    ``io_callback``: a side effect XLA neither drops nor repeats.

    The numpy backend keeps one stream per plan, whatever the run-time shapes: so does this, in
    ``ctx.host_state`` (kept across the compiled block's traces, keyed by the op)."""
    p, is_test = op.attr("p"), op.attr("is_test")
    if is_test or p == 0.0:
        return lambda x: (x, jnp.ones_like(x))
    stream = ctx.host_state.setdefault(("dropout", ctx.where), dropout_stream(op))

    def run(x):
        dtype = np.dtype(x.dtype)
        mask = io_callback(lambda: dropout_mask(stream, x.shape, p, dtype), jax.ShapeDtypeStruct(x.shape, dtype))
        return x * mask, mask

    return run


LOWERINGS = {"dropout": _dropout}
