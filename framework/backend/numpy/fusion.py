"""Plan-time fusion of a weight-gradient product into the SGD update that consumes it.

``g = matmul(X, Y); w' = sgd(w, g, lr)`` costs a product into g and two
passes over w-sized arrays. When g is read by nothing else, is not fetched,
and the update runs right after the product (``schedule`` puts it there),
the pair is one BLAS call: copy w into the update's buffer, then
``gemm(alpha=-lr, X, Y, beta=1)`` into it. The rounding differs from the
two-step form only by where ``lr`` multiplies in (``-lr * sum`` accumulated
onto w instead of ``w - lr * sum``), well inside float tolerance.
The product runs on ``backend.numpy.blas.gemm`` (the chosen BLAS; numpy's matmul for small products).

A fusion is a rewrite of the plan's list of units (``plan_data.Unit``): a
fused unit runs several ops with a kernel of its own, under the last op's
index, and the vars only those ops shared never exist.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .blas import gemm, prepare_gemm
from .kernels import fits
from .plan_data import Unit

__all__ = ["fuse_gemm_updates", "is_gemm_update", "sgd_gemm", "sgd_gemm_writer"]


def _fusable(block, prod, upd, keep: set, readers: Mapping[str, int]) -> bool:
    """True when op ``prod`` is a 2-D float product whose one output only op ``upd``, a plain SGD, reads."""
    if prod.type != "matmul" or upd.type != "sgd" or len(prod.output_arg_names) != 1:
        return False
    g = prod.output_arg_names[0]
    param = upd.input("Param")[0]
    if upd.input("Grad") != [g] or upd.output("ParamOut") != [param] or g in keep or readers.get(g) != 1:
        return False
    types = [block.var(n) for n in (prod.input("X")[0], prod.input("Y")[0], g, param)]
    return not block.var(g).persistable and all(
        len(t.shape) == 2 and t.dtype in ("float32", "float64") and t.dtype == types[0].dtype for t in types)


def fuse_gemm_updates(block, units: Sequence[Unit], keep: set,
                      blas: Callable[..., np.ndarray] | None = gemm) -> list[Unit]:
    """``units`` with every product unit followed by the SGD unit fusable with it replaced by one fused unit.

    ``keep`` are the fetched vars (a fetched gradient must exist, so it is not fused away); ``blas`` is the
    GEMM to fuse with (``blas.gemm``; None where numpy's BLAS is not reachable: then nothing is fused).
    """
    if blas is None:
        return list(units)
    readers: dict[str, int] = {}
    for op in block.ops:
        for name in op.input_arg_names:
            readers[name] = readers.get(name, 0) + 1
    fused: list[Unit] = []
    for unit in units:
        last = fused[-1] if fused else None
        if (last is not None and len(last.ops) == len(unit.ops) == 1
                and _fusable(block, block.ops[last.index], block.ops[unit.index], keep, readers)):
            prod, upd = block.ops[last.index], block.ops[unit.index]
            ins = (prod.input("X")[0], prod.input("Y")[0], upd.input("Param")[0], upd.input("LearningRate")[0])
            fused[-1] = Unit(index=unit.index, ops=last.ops + unit.ops, ins=ins, outs=unit.outs,
                             kernel=sgd_gemm(prod, blas))
        else:
            fused.append(unit)
    return fused


def sgd_gemm(prod, blas: Callable[..., np.ndarray]) -> Callable[..., Any]:
    """The fused kernel: ``fn(X, Y, param, lr, *, out=None)`` returns the updated param, in ``out`` if it fits."""
    tx, ty = prod.attr("transpose_x"), prod.attr("transpose_y")

    def run(x, y, param, lr, *, out=None):
        if not fits(out, param):
            out = np.empty(param.shape, param.dtype)
        np.copyto(out, param)
        return blas(tx, ty, -float(lr.reshape(())), x, y, 1.0, out)

    return run


def sgd_gemm_writer(prod) -> Callable[..., Callable[[], np.ndarray]]:
    """The fused update written onto the parameter itself: ``fn(X, Y, param, lr)`` checks and prepares, and
    returns the function that makes the write (``backend.numpy.in_place``)."""
    tx, ty = prod.attr("transpose_x"), prod.attr("transpose_y")
    return lambda x, y, param, lr: prepare_gemm(tx, ty, -float(lr.reshape(())), x, y, 1.0, param)


def is_gemm_update(block, unit: Unit) -> bool:
    """True for a unit ``fuse_gemm_updates`` made: a product and the SGD update it feeds."""
    return (unit.kernel is not None and len(unit.ops) == 2
            and (block.ops[unit.ops[0]].type, block.ops[unit.ops[1]].type) == ("matmul", "sgd"))
