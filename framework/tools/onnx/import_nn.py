"""ONNX importers of transposed convolution and pooling (1 to 3 spatial dims), batch, layer, group and instance norm,
dropout, CumSum, TopK (a full sort as sort) and GatherElements nodes (see ``import_table``)."""
from __future__ import annotations

import numpy as np

from gradgen.program.errors import ProgramError
from gradgen.program.layers.network import grouped_layer_norm
from gradgen.program.ops.conv import pool_out_size

from .errors import NotImportable
from .import_checks import written_decimal
from .import_ops import FLOATS
from .import_windows import onnx_pads, out_with_channel_bias, spatial_dims


def conv_transpose(ctx):
    dims = spatial_dims(ctx, "transposed convolution")
    if ctx.attr("output_shape", None) is not None or ctx.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise NotImportable("output_shape or auto_pad (give pads and output_padding)")
    pads = ctx.attr_ints("pads", [0] * 2 * dims, 2 * dims)
    if pads[:dims] != pads[dims:]:
        raise NotImportable(f"asymmetric pads {pads}")
    out_with_channel_bias(ctx, "conv2d_transpose", {"Input": ctx.x(0), "Filter": ctx.x(1)}, {
        "strides": ctx.attr_ints("strides", [1] * dims, dims), "paddings": pads[:dims],
        "dilations": ctx.attr_ints("dilations", [1] * dims, dims), "groups": int(ctx.attr("group", 1)),
        "output_padding": ctx.attr_ints("output_padding", [0] * dims, dims)})


def cumsum(ctx):
    axis = int(ctx.scalar(1))
    ctx.out("cumsum", {"X": ctx.x(0)}, {"axis": axis, "exclusive": bool(ctx.attr("exclusive", 0)),
                                        "reverse": bool(ctx.attr("reverse", 0))})


def _k(ctx) -> int | None:
    """TopK's K: the ``k`` attr before opset 10, input 1 from then on; None when that input is known only at
    run time."""
    if ctx.opset < 10:
        return int(ctx.attr("k"))
    return int(ctx.scalar(1)) if ctx.is_const(1) else None


def _whole_axis(ctx, axis: int, k: int | None) -> bool:
    """Whether TopK's K is the length of X's ``axis``: a constant equal to its static size, or that dim read at
    run time (``Shape`` of X with start..end the one axis)."""
    if k is not None:
        return ctx.shape(0)[axis] >= 0 and k == ctx.shape(0)[axis]
    return ctx.has(1) and ctx.graph.lookup_symbol("dims", ctx.node.input[1]) == (ctx.x(0), axis)


def top_k(ctx):
    # ONNX and gradgen both put the lower index first among equal values; sorted=0 leaves the order free.
    # K the whole axis is a full sort: gradgen's sort, which also runs when that length is known only at run time
    axis = ctx.axis(int(ctx.attr("axis", -1)), ctx.rank(0))
    largest = bool(ctx.attr("largest", 1))
    names = {"Out": [ctx.node.output[0]], "Indices": [ctx.node.output[1]]}
    k = _k(ctx)
    if _whole_axis(ctx, axis, k):
        names = ctx.op("sort", {"X": ctx.x(0)}, {"axis": axis, "descending": largest}, names=names)
    else:
        k = int(ctx.scalar(1)) if k is None else k  # a run-time K that is not the whole axis: refused by name
        names = ctx.op("top_k", {"X": ctx.x(0)}, {"k": k, "axis": axis, "largest": largest}, names=names)
    ctx.bind(0, names["Out"][0])
    ctx.bind(1, names["Indices"][0])


def gather_elements(ctx):
    ctx.out("take_along_axis", {"X": ctx.x(0), "Index": ctx.x(1)}, {"axis": int(ctx.attr("axis", 0))})


def _past_padding(ctx, ksize, strides, pads, dilations):
    """For ``count_include_pad`` average pooling in ceil mode: per window [1, 1, *out], its taps in the input over
    its taps in the padded input (ONNX's divisor, as PyTorch's), the factor that turns gradgen's exclusive average
    into ONNX's; None when every window lies inside the padded input (``exclusive=False`` is exact then)."""
    size, dims = ctx.shape(0)[2:], len(ksize)
    if -1 in size:
        raise NotImportable("ceil-mode average pooling with count_include_pad on an input of unknown spatial size")
    inside, padded = np.ones(()), np.ones(())
    for n, k, s, b, a, d in zip(size, ksize, strides, pads[:dims], pads[dims:], dilations):
        out = pool_out_size(n, (k - 1) * d + 1, s, b, a, True)
        taps = (np.arange(out) * s - b)[:, None] + np.arange(k) * d
        inside = np.multiply.outer(inside, ((taps >= 0) & (taps < n)).sum(1))
        padded = np.multiply.outer(padded, ((taps >= -b) & (taps < n + a)).sum(1))
    if (padded == np.prod(ksize)).all():
        return None
    return (inside / padded).reshape(1, 1, *inside.shape).astype(ctx.dtype(0))


def _reduction(ctx) -> bool:
    """Whether a Scatter node adds its updates (``reduction="add"``) rather than writing them ("none")."""
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add"):
        raise NotImportable(f"reduction='{reduction}' (gradgen imports 'none' and 'add')")
    return reduction == "add"


def scatter_elements(ctx):
    """ScatterElements -> take_along_axis_grad, which adds Updates at Index along the axis onto zeros shaped
    like Data (the adjoint of GatherElements, differentiable in Updates): added to Data for "add"; for "none"
    Data where no index points, else the updates (repeated indices add up there; ONNX leaves them undefined).
    Floats, with Indices shaped like Data but on the axis (so that Updates' gradient is a take_along_axis)."""
    if ctx.dtype(0) not in FLOATS:
        raise NotImportable(f"Data of type {ctx.dtype(0)} (floats only)")
    rank = ctx.rank(0)
    axis = ctx.axis(int(ctx.attr("axis", 0)), rank)
    data, index, updates = ctx.x(0), ctx.x(1), ctx.x(2)
    if ctx.rank(1) != rank or any(a != b for i, (a, b) in enumerate(zip(ctx.shape(0), ctx.shape(1))) if i != axis):
        raise NotImportable(f"Indices {list(ctx.shape(1))} not shaped like Data {list(ctx.shape(0))} off axis {axis}")
    placed = ctx.tmp("take_along_axis_grad", {"X": data, "Index": index, "Out@GRAD": updates}, {"axis": axis},
                     slot="X@GRAD")
    if _reduction(ctx):
        return ctx.out("elementwise_add", {"X": data, "Y": placed})
    ones = ctx.tmp("fill_any_like", {"X": updates}, {"value": 1.0})
    hits = ctx.tmp("take_along_axis_grad", {"X": data, "Index": index, "Out@GRAD": ones}, {"axis": axis},
                   slot="X@GRAD")
    hit = ctx.tmp("greater_than", {"X": hits, "Y": ctx.tmp("fill_zeros_like", {"X": hits})})
    ctx.out("where", {"Condition": hit, "X": placed, "Y": data})


def scatter_nd(ctx):
    """ScatterND -> scatter (or scatter_add for "add") along axis 0 of Data with its first k dims merged into
    one, the k-tuples of Indices turned into positions in that merged dim (negative components count from the
    end); reshaped back. Data's shape must be known at import; "none" with a repeated position is a run-time
    error (ONNX leaves it undefined)."""
    add = _reduction(ctx)
    dims, k = ctx.shape(0), ctx.shape(1)[-1] if ctx.rank(1) else -1
    if k < 1 or k > len(dims) or -1 in dims[:k]:
        raise NotImportable(f"Indices {list(ctx.shape(1))} into Data {list(dims)} (the last dim of Indices and the "
                            "Data dims it indexes must be known)")
    if ctx.dtype(1) != "int64":
        raise NotImportable(f"Indices of type {ctx.dtype(1)}")
    index, sizes = ctx.x(1), ctx.importer.constant_var(f"{ctx.node.output[0]}_dims", np.array(dims[:k], np.int64))
    zero = ctx.tmp("fill_zeros_like", {"X": index})
    wrapped = ctx.tmp("elementwise_add", {"X": index, "Y": sizes})
    index = ctx.tmp("where", {"Condition": ctx.tmp("less_than", {"X": index, "Y": zero}), "X": wrapped, "Y": index})
    strides = np.cumprod((list(dims[1:k]) + [1])[::-1])[::-1].astype(np.int64)
    weights = ctx.importer.constant_var(f"{ctx.node.output[0]}_strides", strides)
    position = ctx.tmp("reduce_sum", {"X": ctx.tmp("elementwise_mul", {"X": index, "Y": weights})},
                       {"dim": [-1], "keep_dim": False, "reduce_all": False})
    rest = list(dims[k:])
    if -1 in rest:
        raise NotImportable(f"Data {list(dims)} has dims known only at run time after the indexed ones")
    merged = ctx.tmp("reshape", {"X": ctx.x(0)}, {"shape": [int(np.prod(dims[:k]))] + rest})
    rows = ctx.tmp("reshape", {"X": ctx.x(2)}, {"shape": [-1] + rest})
    flat = ctx.tmp("reshape", {"X": position}, {"shape": [-1]})
    done = ctx.tmp("scatter_add" if add else "scatter", {"X": merged, "Index": flat, "Updates": rows}, {"axis": 0})
    ctx.out("reshape", {"X": done}, {"shape": list(dims)})


def _pool(kind):
    def translate(ctx):
        dims = spatial_dims(ctx, "pooling")
        if len(ctx.node.output) > 1 and ctx.node.output[1]:
            raise NotImportable("the Indices output")
        ksize, dilations = ctx.attr_ints("kernel_shape", length=dims), ctx.attr_ints("dilations", [1] * dims, dims)
        strides, pads = ctx.attr_ints("strides", [1] * dims, dims), onnx_pads(ctx, ksize, dilations)
        ceil, exclusive = bool(ctx.attr("ceil_mode", 0)), not ctx.attr("count_include_pad", 0)
        share = _past_padding(ctx, ksize, strides, pads, dilations) if kind == "avg" and ceil and not exclusive \
            else None
        attrs = {"pooling_type": kind, "ksize": ksize, "strides": strides,
                 "paddings": [p for d in range(dims) for p in (pads[d], pads[dims + d])], "dilations": dilations,
                 "exclusive": exclusive or share is not None, "ceil_mode": ceil}
        if share is None:
            return ctx.out("pool2d", {"X": ctx.x(0)}, attrs)
        y = ctx.tmp("pool2d", {"X": ctx.x(0)}, attrs)
        ctx.out("elementwise_mul", {"X": y, "Y": ctx.importer.constant_var("pool_divisor_share", share)})
    return translate


def global_average_pool(ctx):
    ctx.out("reduce_mean", {"X": ctx.x(0)}, {"dim": list(range(2, 2 + spatial_dims(ctx, "pooling"))), "keep_dim": True})


def _normalized_groups(ctx, groups: int | None) -> str:
    """Input 0 normalized per sample over each of ``groups`` groups of channels (None: one per channel) and all
    spatial positions, in the [N, groups, rest] view: ``layers.grouped_layer_norm``, as ``layers.group_norm``
    builds it."""
    shape = ctx.shape(0)
    if groups is None:
        groups = shape[1] if len(shape) > 1 else -1
    refused = f"normalizing {groups} groups of the channels of an input shaped {list(shape)}"
    if len(shape) < 3:
        raise NotImportable(refused)
    try:
        y = grouped_layer_norm(ctx.importer.block().var(ctx.x(0)), groups, ctx.attr("epsilon", 1e-5))
    except ProgramError:
        raise NotImportable(refused) from None
    return y.name


def _affine(ctx, y: str, rank: int, final: bool) -> str:
    """``y * scale + bias``, scale and bias (inputs 1 and 2) one value per channel (axis 1) of a rank-``rank`` y;
    the node's output if ``final``."""
    per_channel = [-1] + [1] * (rank - 2)
    y = ctx.tmp("elementwise_mul", {"X": y, "Y": ctx.tmp("reshape", {"X": ctx.x(1)}, {"shape": per_channel})})
    add = {"X": y, "Y": ctx.tmp("reshape", {"X": ctx.x(2)}, {"shape": per_channel})}
    return ctx.out("elementwise_add", add) if final else ctx.tmp("elementwise_add", add)


def instance_norm(ctx):
    """InstanceNormalization: group norm with a group per channel."""
    y = ctx.tmp("reshape_as", {"X": _normalized_groups(ctx, None), "Target": ctx.x(0)})
    _affine(ctx, y, ctx.rank(0), final=True)


def group_norm(ctx):
    """GroupNormalization: scale and bias per group before opset 21 (on the grouped view), per channel from 21."""
    y = _normalized_groups(ctx, int(ctx.attr("num_groups")))
    if ctx.opset < 21:
        return ctx.out("reshape_as", {"X": _affine(ctx, y, 3, final=False), "Target": ctx.x(0)})
    _affine(ctx, ctx.tmp("reshape_as", {"X": y, "Target": ctx.x(0)}), ctx.rank(0), final=True)


def _training(ctx) -> bool:
    """Whether a BatchNormalization normalizes by the batch's statistics: ``training_mode`` (opset 14 on), or
    running-statistics outputs asked for (before 14, where they imply it)."""
    asked = len([o for o in ctx.node.output[1:] if o]) > 0
    if ctx.opset >= 14:
        return bool(ctx.attr("training_mode", 0))
    return asked


def _running_stat(ctx, k: int) -> str:
    """Input k (the running mean or variance) as the persistable var batch_norm updates in place: it stays a
    parameter (saved with the others) that no optimizer updates."""
    var = ctx.var(k)
    if not var.persistable:
        raise NotImportable(f"input {k} ('{ctx.node.input[k]}'), a running statistic updated in training, must be "
                            "an initializer")
    var.trainable, var.stop_gradient = False, True
    return var.name


def _fixed_stat(ctx, k: int) -> str:
    """Input k (the mean or variance) of an inference-mode node: a statistic, not learned (batch_norm has no
    gradient for it), so an initializer there is a parameter no optimizer updates, as in training mode (PyTorch
    keeps it as a buffer), not a trainable one left without a gradient."""
    var = ctx.var(k)
    if var.persistable:
        var.trainable, var.stop_gradient = False, True
    return var.name


def batch_norm(ctx):
    """BatchNormalization -> batch_norm. In training mode the batch's statistics normalize and the running
    mean and variance (initializers) are updated in place on every run, as ONNX's outputs define them:
    momentum * running + (1 - momentum) * batch statistic (ONNX's momentum weighs the old value, as gradgen's
    does; the batch variance is the population one, as ONNX specifies, or the unbiased one, as PyTorch's
    BatchNorm has it, for a PyTorch export or when the import is asked to: ``import_onnx(bn_running_variance=...)``)."""
    training = _training(ctx)
    if len(ctx.node.output) > 3 and any(ctx.node.output[3:]):
        raise NotImportable("the saved_mean/saved_var outputs")
    if not training and any(ctx.node.output[1:]):
        raise NotImportable("running-statistics outputs in inference mode")
    inputs = {"X": ctx.x(0), "Scale": ctx.x(1), "Bias": ctx.x(2)}
    attrs = {"epsilon": ctx.attr("epsilon", 1e-5), "momentum": ctx.attr("momentum", 0.9),
             "is_test": not training, "running_variance": ctx.importer.bn_running_variance}
    if not training:
        names = ctx.op("batch_norm", {**inputs, "Mean": _fixed_stat(ctx, 3), "Variance": _fixed_stat(ctx, 4)}, attrs,
                       names={"Y": [ctx.node.output[0]]})
        return ctx.bind(0, names["Y"][0])
    mean, var = _running_stat(ctx, 3), _running_stat(ctx, 4)
    y = ctx.importer.fresh(ctx.node.output[0])
    ctx.importer.block().append_op("batch_norm", {**inputs, "Mean": [mean], "Variance": [var]},
                                   {"Y": [y], "MeanOut": [mean], "VarianceOut": [var]}, attrs,
                                   callsite=f"onnx node {ctx.node.name!r}")
    for k, name in enumerate((y, mean, var)):
        if k < len(ctx.node.output) and ctx.node.output[k]:
            ctx.bind(k, name)


def from_pytorch(model) -> bool:
    """Whether PyTorch's exporter wrote ``model`` (its ``producer_name`` is "pytorch")."""
    producer = model.producer_name
    if isinstance(producer, bytes):
        producer = producer.decode("utf-8", "replace")
    return producer.lower().startswith("pytorch")


def default_running_variance(model) -> str:
    """The ``running_variance`` of an import's training-mode batch norms when the caller does not choose:
    "unbiased" for a PyTorch export, whose BatchNorm moves its running variance toward the batch's unbiased
    variance (its training-mode export keeps the module's rule, which ONNX's BatchNormalization cannot state),
    else "population", ONNX's definition."""
    return "unbiased" if from_pytorch(model) else "population"


def _ratio(ctx) -> float:
    """Dropout's ratio (input 1); a float32 one (PyTorch writes the ratio as float32 whatever the model's dtype)
    as the decimal written (0.3, not 0.30000001192): a float64 model scales the kept by 1 / 0.7 exactly."""
    p = ctx.scalar(1)
    return written_decimal(p) if ctx.const(1).dtype == np.float32 else float(p)


def dropout(ctx):
    """Dropout -> assign in inference, gradgen's dropout with ``training_mode`` true (opset 12 on: the ratio
    and the mode are inputs, which must be constants; the ``seed`` attr seeds it). The bool Mask output is
    where gradgen's mask (the factor each element was multiplied by) is nonzero."""
    training = ctx.opset >= 12 and ctx.has(2) and bool(ctx.scalar(2))
    if not training:
        ctx.out("assign", {"X": ctx.x(0)})
        if len(ctx.node.output) > 1 and ctx.node.output[1]:
            ctx.bind(1, ctx.tmp("fill_any_like", {"X": ctx.x(0)}, {"value": 1.0, "dtype": "bool"}))
        return
    p = _ratio(ctx) if ctx.has(1) else 0.5
    if not 0.0 <= p < 1.0:
        raise NotImportable(f"ratio {p} (it must be in [0, 1))")
    names = ctx.op("dropout", {"X": ctx.x(0)}, {"p": p, "is_test": False, "seed": int(ctx.attr("seed", 0))},
                   names={"Out": [ctx.node.output[0]]})
    ctx.bind(0, names["Out"][0])
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        ctx.bind(1, ctx.tmp("cast", {"X": names["Mask"][0]}, {"out_dtype": "bool"}))
