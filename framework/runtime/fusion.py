"""Plan-time fusion of a weight-gradient product into the SGD update that consumes it.

``g = matmul(X, Y); w' = sgd(w, g, lr)`` costs a product into g and two
passes over w-sized arrays. When g is read by nothing else, is not fetched,
and the update runs right after the product (``schedule`` puts it there),
the pair is one BLAS call: copy w into the update's buffer, then
``gemm(alpha=-lr, X, Y, beta=1)`` into it. The rounding differs from the
two-step form only by where ``lr`` multiplies in (``-lr * sum`` accumulated
onto w instead of ``w - lr * sum``), well inside float tolerance.
Only with ``runtime.blas.gemm`` (numpy's own BLAS) available.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .blas import gemm


def gemm_update_pairs(block, ops: Sequence, keep: set, readers: Mapping[str, int]) -> dict[int, int]:
    """Positions in the scheduled ``ops`` of fusable (product, update) pairs: update position -> product position.

    ``readers[name]`` counts the ops that read ``name``; ``keep`` are fetched vars.
    """
    if gemm is None:
        return {}
    pairs = {}
    for p in range(len(ops) - 1):
        prod, upd = ops[p], ops[p + 1]
        if prod.type != "matmul" or upd.type != "sgd" or len(prod.output_arg_names) != 1:
            continue
        g = prod.output_arg_names[0]
        param = upd.input("Param")[0]
        if upd.input("Grad") != [g] or upd.output("ParamOut") != [param] or g in keep or readers.get(g) != 1:
            continue
        types = [block.var(n) for n in (prod.input("X")[0], prod.input("Y")[0], g, param)]
        if any(len(t.shape) != 2 or t.dtype not in ("float32", "float64") or t.dtype != types[0].dtype
               for t in types) or block.var(g).persistable:
            continue
        pairs[p + 1] = p
    return pairs


def sgd_gemm(prod) -> Callable[..., Any]:
    """The fused step: takes (X, Y, param, lr, buf), returns the updated param in ``buf`` (or a fresh array)."""
    tx, ty = prod.attr("transpose_x"), prod.attr("transpose_y")

    def run(x, y, param, lr, buf):
        if buf is None or buf.shape != param.shape or buf.dtype != param.dtype:
            buf = np.empty(param.shape, param.dtype)
        np.copyto(buf, param)
        return gemm(tx, ty, -float(lr.reshape(())), x, y, 1.0, buf)

    return run
