"""Ops behind the network layers that are more than a composition: dropout, lookup_table, batch_norm.

``is_test`` switches dropout and batch norm to inference; ``Program.clone(for_test=True)``
sets it on every op whose schema has it.
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from ..schema import Attr, TensorType, schema
from ..shapes import dims_agree


def _dropout(ctx):
    x = ctx.input("X")
    if not 0.0 <= ctx.attr("p") < 1.0:
        ctx.fail(f"p must be in [0, 1), got {ctx.attr('p')}")
    return {"Out": x, "Mask": x}


def _lookup_table(ctx):
    w, ids = ctx.input("W"), ctx.input("Ids")
    if len(w.shape) != 2:
        ctx.fail(f"W must be a [vocabulary, width] table, got shape {list(w.shape)}")
    return {"Out": TensorType(tuple(ids.shape) + (w.shape[1],), w.dtype)}


def _batch_norm(ctx):
    x = ctx.input("X")
    if len(x.shape) < 2:
        ctx.fail(f"X needs a channel axis 1 (rank >= 2), got shape {list(x.shape)}")
    c = x.shape[1]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        t = ctx.input(slot)
        if len(t.shape) != 1 or not dims_agree(t.shape[0], c):
            ctx.fail(f"{slot} must be {x.dtype}[{c}] (one per channel), got {t.dtype}{list(t.shape)}")
    return {"Y": x, "MeanOut": ctx.input("Mean"), "VarianceOut": ctx.input("Variance")}


SCHEMAS = (
    schema("dropout", ["X"], ["Out", "Mask"], _dropout,
           {"p": Attr("float", 0.5), "is_test": Attr("bool", False), "seed": Attr("int", 0)},
           doc="Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when is_test); "
               "Mask holds the factor each element was multiplied by. Samples come from a PCG64 stream seeded "
               "with `seed` that advances with every run of one compiled plan.", stateful=True,
           dtypes={"X": FLOAT_DTYPES}),
    schema("lookup_table", ["W", "Ids"], ["Out"], _lookup_table,
           doc="The rows of table W at the integers of Ids: an embedding lookup.",
           dtypes={"W": FLOAT_DTYPES, "Ids": INT_DTYPES}),
    schema("batch_norm", ["X", "Scale", "Bias", "Mean", "Variance"], ["Y", "MeanOut", "VarianceOut"], _batch_norm,
           {"momentum": Attr("float", 0.9), "epsilon": Attr("float", 1e-5), "is_test": Attr("bool", False)},
           doc="Normalize each channel (axis 1) by the batch's statistics, then scale and shift; in training "
               "the running Mean/Variance (written in place through MeanOut/VarianceOut) move toward them by "
               "1 - momentum. With is_test, the running statistics normalize instead.",
           dtypes={"X": FLOAT_DTYPES, "Scale": "X", "Bias": "X", "Mean": "X", "Variance": "X"}),
)


__all__ = ["SCHEMAS"]
