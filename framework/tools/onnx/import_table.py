"""ONNX op type -> the function that imports a node of it, gathered from the importer modules."""
from __future__ import annotations

from gradgen.program.layers import math as L
from gradgen.program.ops import OP_SCHEMAS

from .errors import NotImportable

from .import_control import (
    if_, loop,
)
from .import_nn import (
    _pool, batch_norm, conv_transpose, cumsum, dropout, gather_elements, global_average_pool, group_norm,
    instance_norm, scatter_elements, scatter_nd, top_k,
)
from .import_positions import eye_like, size
from .import_range import range_
from .import_recurrent import gru, lstm
from .import_ops import (
    BINARY, COMPARE, REDUCE, UNARY, _arg, _floats_only, _binary, _compare, _reduce, _softmax, _unary, _variadic, cast, clip,
    concat, constant, constant_of_shape, einsum, elu, expand, flatten, floor, gather, gemm, is_inf, is_nan, leaky_relu,
    matmul, mod, neg, not_, pad, random_normal, random_normal_like, random_uniform, random_uniform_like, reshape,
    safe_sqrt, shape, slice_, split, squeeze, transpose, trilu, unsqueeze, where,
)

__all__ = ["COMPOSITES", "IMPORTERS"]


def _composite(layer, attrs: dict):
    """An ONNX activation that gradgen writes as a composition (``layers.math.ONNX_COMPOSITES``): the layer that
    composes it, on input 0 (floats only), its keywords read from the node's attrs."""
    def translate(ctx):
        _floats_only(ctx)
        given = {}
        for kw, (onnx_name, default, convert) in attrs.items():
            value = ctx.attr(onnx_name, default)
            try:
                given[kw] = convert(value)
            except (KeyError, TypeError, ValueError):
                raise NotImportable(f"attr '{onnx_name}' = {value!r} is not one gradgen knows") from None
        x = ctx.importer.block().var(ctx.x(0))
        ctx.bind(0, layer(x, **given).name)

    return translate


COMPOSITES = {onnx_type: _composite(layer, attrs) for onnx_type, (layer, attrs) in L.ONNX_COMPOSITES.items()}
"""ONNX activations gradgen writes as compositions (``program/layers/math.py``)."""


IMPORTERS = {
    **{t: _binary(o) for t, o in BINARY.items()},
    **{t: _unary(o) for t, o in UNARY.items()},
    **{t: _compare(o) for t, o in COMPARE.items()},
    **{t: _reduce(o) for t, o in REDUCE.items()},
    **COMPOSITES,
    "Sum": _variadic("elementwise_add"), "Max": _variadic("elementwise_max"), "Min": _variadic("elementwise_min"),
    "Neg": neg, "LeakyRelu": leaky_relu, "Clip": clip, "MatMul": matmul, "Gemm": gemm,
    "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"), "Reshape": reshape, "Flatten": flatten,
    "Transpose": transpose, "Concat": concat, "Split": split, "Slice": slice_, "Squeeze": squeeze,
    "Unsqueeze": unsqueeze, "Gather": gather, "Pad": pad, "Einsum": einsum, "Cast": cast, "Where": where,
    "ArgMax": _arg("argmax"), "ArgMin": _arg("argmin"), "Expand": expand, "Elu": elu, "Not": not_,
    "CumSum": cumsum, "TopK": top_k, "GatherElements": gather_elements, "ConvTranspose": conv_transpose,
    "Constant": constant, "Shape": shape, "ConstantOfShape": constant_of_shape,
    "MaxPool": _pool("max"), "AveragePool": _pool("avg"), "GlobalAveragePool": global_average_pool,
    "RandomUniformLike": random_uniform_like, "RandomNormalLike": random_normal_like,
    "RandomUniform": random_uniform, "RandomNormal": random_normal,
    "ScatterElements": scatter_elements, "ScatterND": scatter_nd, "Mod": mod,
    "ReduceSumSquare": _reduce("reduce_sum", of="square"), "ReduceL1": _reduce("reduce_sum", of="abs"),
    "ReduceL2": _reduce("reduce_sum", of="square", then=safe_sqrt), "IsNaN": is_nan, "IsInf": is_inf,
    "BatchNormalization": batch_norm, "Dropout": dropout, "If": if_, "Loop": loop,
    "InstanceNormalization": instance_norm, "GroupNormalization": group_norm,
    "Trilu": trilu, "Range": range_,
    "LSTM": lstm, "GRU": gru,
    "Size": size, "EyeLike": eye_like, "Floor": floor,
    **{schema.onnx_mapping.node: schema.onnx_mapping.from_onnx for schema in OP_SCHEMAS.values()
       if schema.onnx_mapping},
}
"""ONNX op type (default domain) -> translation function (an op's one-node mapping from its schema,
``OpSchema.onnx_mapping``, among them)."""
