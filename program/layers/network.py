"""Network layers: fully connected, dropout, embedding, layer, batch, group and instance normalization.

``fc`` is a composition of ordinary ops, so its gradients (of every order)
are those ops' gradients; dropout, embedding, layer norm and batch norm are
single ops of their own. Group and instance norm are layer norm over a
grouped view of the input (one fused ``layer_norm`` between two reshapes), then
a per-channel scale and shift.
"""
from __future__ import annotations

import math

from ..dtypes import normalize_dtype
from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..initializer import Constant
from ..param_attr import ParamAttr, to_param_attr
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var
from .naming import named


def _fc_inputs(x, input) -> tuple[list[Variable], bool]:
    """The input vars of ``fc`` and whether they came the Paddle way (``input=``)."""
    if (x is None) == (input is None):
        raise ProgramError("fc takes its input once: as x (gradgen) or as input= (Paddle)")
    given = input if input is not None else x
    xs = list(given) if isinstance(given, (list, tuple)) else [given]
    if not xs:
        raise ProgramError("fc needs at least one input var")
    return [check_var(v, "fc input") for v in xs], input is not None


def _flattened(x: Variable, num_flatten_dims: int) -> Variable:
    """x as ``x.shape[:k] + [product of the rest]``, the matrix rows and columns Paddle's fc multiplies."""
    if not 1 <= num_flatten_dims < len(x.shape):
        raise ProgramError(f"fc: num_flatten_dims must be in [1, {len(x.shape) - 1}] for '{x.name}' "
                           f"{x.type_str()}, got {num_flatten_dims}")
    cols = x.shape[num_flatten_dims:]
    if any(d < 0 for d in cols):
        raise ProgramError(f"fc needs the dims of '{x.name}' from axis {num_flatten_dims} on known, got "
                           f"{x.type_str()}")
    if num_flatten_dims == len(x.shape) - 1:
        return x
    width = 1
    for d in cols:
        width *= d
    return append("reshape", {"X": x}, {"shape": [0] * num_flatten_dims + [width]})


def _param_from_attr(attr: ParamAttr, default_name: str, shape, dtype: str, initializer=None) -> Variable:
    return create_parameter(shape, dtype, name=attr.name or default_name, trainable=attr.trainable,
                            initializer=attr.initializer if attr.initializer is not None else initializer)


@named
def fc(x: Variable | None = None, size: int | None = None, act: str | None = None, bias: bool = True,
       name: str | None = None, *, input=None, param_attr=None, bias_attr=None,
       num_flatten_dims: int | None = None) -> Variable:
    """``act(x @ w + b)`` with ``w: [x.shape[-1], size]`` (Xavier) and ``b: [size]`` (zeros) created here.

    Paddle's spelling works too: ``fc(input=x, size=10, param_attr=ParamAttr(...), bias_attr=False)``;
    ``input`` may be a list (each input gets its own weight, the products are summed). Inputs of rank > 2
    are multiplied over their last axis when given as ``x`` (gradgen), and flattened from axis
    ``num_flatten_dims`` (default 1, so an image becomes one row) when given as ``input`` (Paddle).
    Parameters are named ``fc_0.w_0``, ``fc_0.b_0``, ... (with ``name``: ``name.w``, ``name.b``).
    """
    xs, paddle_style = _fc_inputs(x, input)
    if size is None or int(size) <= 0:
        raise ProgramError(f"fc needs a positive size, got {size!r}")
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(xs)
    if len(attrs) != len(xs):
        raise ProgramError(f"fc got {len(attrs)} param_attrs for {len(xs)} inputs")
    w_attrs = [to_param_attr(a, "param_attr") for a in attrs]
    if any(a is None for a in w_attrs):
        raise ProgramError("fc: param_attr=False would leave no weight")
    named = [a.name for a in w_attrs if a.name]
    if len(set(named)) != len(named):
        raise ProgramError(f"fc: {len(xs)} inputs cannot share the weight name '{named[0]}' (give one per input)")
    program = default_main_program()
    base = name or program.unique_name("fc")
    outs = []
    for i, (v, attr) in enumerate(zip(xs, w_attrs)):
        k = len(v.shape) - 1 if num_flatten_dims is None and not paddle_style else (num_flatten_dims or 1)
        flat = _flattened(v, k)
        default = (f"{base}.w" if i == 0 else f"{base}.w_{i}") if name else f"{base}.w_{i}"
        w = _param_from_attr(attr, default, [flat.shape[-1], size], v.dtype)
        outs.append(append("matmul", {"X": flat, "Y": w}))
    out = outs[0] if len(outs) == 1 else append("sum", {"X": outs})
    b_attr = to_param_attr(bias_attr, "bias_attr") if bias else None
    if b_attr is not None:
        b = _param_from_attr(b_attr, f"{base}.b" if name else f"{base}.b_0", [size], xs[0].dtype, Constant(0.0))
        out = append("elementwise_add", {"X": out, "Y": b})
    return append(act, {"X": out}) if act else out


@named
def dropout(x: Variable, p: float = 0.5, is_test: bool = False, seed: int | None = None, name=None) -> Variable:
    """Zero elements with probability ``p`` in training and scale the rest by 1/(1-p); identity with is_test."""
    program = default_main_program()
    seed = program.next_seed() if seed is None else int(seed)
    out, mask = append("dropout", {"X": check_var(x, "x")}, {"p": p, "is_test": is_test, "seed": seed},
                       out_slots=("Out", "Mask"), name=name)
    mask.stop_gradient = True
    return out


@named
def embedding(ids: Variable | None = None, size=None, dtype="float32", name: str | None = None, *, input=None,
              param_attr=None) -> Variable:
    """Rows of a ``[vocabulary, width]`` table (``size``) at the integers of ``ids``.

    Paddle's ``embedding(input=ids, size=..., param_attr=...)`` works too; the table is named
    ``embedding_0.w_0``, ... (with ``name``: ``name.w``).
    """
    if (ids is None) == (input is None):
        raise ProgramError("embedding takes its ids once: as ids (gradgen) or as input= (Paddle)")
    ids = check_var(ids if ids is not None else input, "ids")
    if size is None or len(size) != 2:
        raise ProgramError(f"embedding needs size=[vocabulary, width], got {size!r}")
    attr = to_param_attr(param_attr, "param_attr")
    if attr is None:
        raise ProgramError("embedding: param_attr=False would leave no table")
    default = f"{name}.w" if name else f"{default_main_program().unique_name('embedding')}.w_0"
    w = _param_from_attr(attr, default, list(size), normalize_dtype(dtype))
    return append("lookup_table", {"W": w, "Ids": ids}, name=name)


@named
def layer_norm(x: Variable, begin_norm_axis: int = -1, epsilon: float = 1e-5, scale: bool = True,
               shift: bool = True, name: str | None = None) -> Variable:
    """Normalize over the dims from ``begin_norm_axis`` on, then scale and shift per element of those dims.

    One ``layer_norm`` op; its Mean and Variance outputs are temporaries the gradient reads.
    """
    check_var(x, "x")
    begin = begin_norm_axis % len(x.shape)
    normalized = list(x.shape[begin:])
    if any(d < 0 for d in normalized):
        raise ProgramError(f"layer_norm needs the normalized dims of '{x.name}' known, got {x.type_str()}")
    program = default_main_program()
    base = name or program.unique_name("layer_norm")
    inputs = {"X": x}
    if scale:
        inputs["Scale"] = create_parameter(normalized, x.dtype, name=f"{base}.scale" if name else f"{base}.w_0",
                                           initializer=Constant(1.0))
    if shift:
        inputs["Bias"] = create_parameter(normalized, x.dtype, name=f"{base}.bias" if name else f"{base}.b_0",
                                          initializer=Constant(0.0))
    y, _, _ = append("layer_norm", inputs, {"begin_norm_axis": begin, "epsilon": epsilon},
                     out_slots=("Y", "Mean", "Variance"), name=name or program.unique_name(f"{base}.y"))
    return y


def _running_stat(like: Variable, name: str, value: float) -> Variable:
    """A persistable, non-trainable per-channel var initialized to ``value`` by the startup program."""
    main, startup = default_main_program(), default_startup_program()
    shape = [like.shape[1]]
    var = main.global_block().create_var(name, shape, like.dtype, persistable=True, stop_gradient=True)
    sblock = startup.global_block()
    sblock.create_var(name, shape, like.dtype, persistable=True, stop_gradient=True)
    sblock.append_op("fill_constant", {}, {"Out": [name]}, {"shape": shape, "dtype": like.dtype, "value": value})
    return var


@named
def batch_norm(x: Variable, momentum: float = 0.9, epsilon: float = 1e-5, is_test: bool = False,
               name: str | None = None, running_variance: str = "population") -> Variable:
    """Per-channel (axis 1) normalization by batch statistics in training, running statistics with is_test.

    ``running_variance`` says what the running variance moves toward: the batch's "population" variance
    (Paddle's and ONNX's rule) or its "unbiased" one, n / (n - 1) times it (PyTorch's ``BatchNorm``)."""
    check_var(x, "x")
    if len(x.shape) < 2 or x.shape[1] < 0:
        raise ProgramError(f"batch_norm needs a known channel axis 1, got '{x.name}' {x.type_str()}")
    program = default_main_program()
    base = name or program.unique_name("batch_norm")
    c = x.shape[1]
    scale = create_parameter([c], x.dtype, name=f"{base}.scale", initializer=Constant(1.0))
    bias = create_parameter([c], x.dtype, name=f"{base}.bias", initializer=Constant(0.0))
    mean = _running_stat(x, f"{base}.mean", 0.0)
    var = _running_stat(x, f"{base}.variance", 1.0)
    y_name = name or program.unique_name(f"{base}.y")
    program.current_block().append_op(
        "batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
        {"Y": [y_name], "MeanOut": [mean.name], "VarianceOut": [var.name]},
        {"momentum": momentum, "epsilon": epsilon, "is_test": is_test, "running_variance": running_variance})
    return program.current_block().var(y_name)


def _per_channel(v: Variable, rank: int) -> Variable:
    """A [C] var as [C, 1, ...], so that it broadcasts along axis 1 of a rank-``rank`` tensor."""
    return append("reshape", {"X": v}, {"shape": [v.shape[0]] + [1] * (rank - 2)})


def grouped_layer_norm(x: Variable, groups: int, epsilon: float, layer: str = "group_norm") -> Variable:
    """X viewed as [N, groups, C / groups * spatial] and each group normalized over its channels and positions:
    group norm's formula as one ``layer_norm`` (fused op, fused gradients), still in that view. ``group_norm``,
    ``instance_norm`` and the ONNX importer's GroupNormalization and InstanceNormalization build on it."""
    if len(x.shape) < 2 or x.shape[1] < 0 or groups <= 0 or x.shape[1] % groups:
        raise ProgramError(f"{layer} needs a known channel axis 1 that divides into {groups} groups, got "
                           f"'{x.name}' {x.type_str()}")
    rest = -1 if any(d < 0 for d in x.shape[2:]) else x.shape[1] // groups * math.prod(x.shape[2:])
    grouped = append("reshape", {"X": x}, {"shape": [0, groups, rest]})
    y, _, _ = append("layer_norm", {"X": grouped}, {"begin_norm_axis": 2, "epsilon": epsilon},
                     out_slots=("Y", "Mean", "Variance"))
    return y


def _grouped_norm(layer: str, x: Variable, groups: int, epsilon: float, scale: bool, shift: bool,
                  act: str | None, name: str | None) -> Variable:
    """``grouped_layer_norm`` reshaped back to X's run-time shape, then scaled and shifted per channel."""
    y = grouped_layer_norm(x, groups, epsilon, layer)
    base = name or default_main_program().unique_name(layer)
    y = append("reshape_as", {"X": y, "Target": x})
    c = x.shape[1]
    if scale:
        w = create_parameter([c], x.dtype, name=f"{base}.scale" if name else f"{base}.w_0", initializer=Constant(1.0))
        y = append("elementwise_mul", {"X": y, "Y": _per_channel(w, len(x.shape))})
    if shift:
        b = create_parameter([c], x.dtype, name=f"{base}.bias" if name else f"{base}.b_0", initializer=Constant(0.0))
        y = append("elementwise_add", {"X": y, "Y": _per_channel(b, len(x.shape))})
    return append(act, {"X": y}) if act is not None else y


@named
def group_norm(x: Variable, groups: int, epsilon: float = 1e-5, scale: bool = True, shift: bool = True,
               act: str | None = None, name: str | None = None) -> Variable:
    """Normalize each sample's channels (axis 1) in ``groups`` groups, each group over its channels and all
    spatial positions, then scale and shift per channel (parameters ``[C]``, ones and zeros; named
    ``group_norm_0.w_0``, ``.b_0``, or ``name.scale``, ``name.bias``), then ``act``."""
    return _grouped_norm("group_norm", check_var(x, "x"), groups, epsilon, scale, shift, act, name)


@named
def instance_norm(x: Variable, epsilon: float = 1e-5, scale: bool = True, shift: bool = True,
                  name: str | None = None) -> Variable:
    """Normalize each sample's every channel over its spatial positions, then scale and shift per channel:
    ``group_norm`` with one channel per group (parameters ``instance_norm_0.w_0``, ``.b_0``)."""
    check_var(x, "x")
    if len(x.shape) < 3 or x.shape[1] < 0:
        raise ProgramError(f"instance_norm needs N-C-spatial input with a known channel count, got '{x.name}' "
                           f"{x.type_str()}")
    return _grouped_norm("instance_norm", x, x.shape[1], epsilon, scale, shift, None, name)


__all__ = ["fc", "dropout", "embedding", "layer_norm", "batch_norm", "group_norm", "grouped_layer_norm",
           "instance_norm"]
