"""Network layers: fully connected, dropout, embedding, layer and batch normalization.

``fc`` and ``layer_norm`` are compositions of ordinary ops, so their
gradients (of every order) are those ops' gradients; dropout, embedding and
batch norm are single ops of their own.
"""
from __future__ import annotations

from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..initializer import Constant
from ..variable import Variable
from .creation import create_parameter
from .helper import append, check_var
from .math import pow as power
from .reduction import reduce_mean


def _param_name(name: str | None, suffix: str) -> str | None:
    return f"{name}.{suffix}" if name else None


def fc(x: Variable, size: int, act: str | None = None, bias: bool = True, name: str | None = None) -> Variable:
    """``act(x @ w + b)`` with ``w: [x.shape[-1], size]`` (Xavier) and ``b: [size]`` (zeros) created here."""
    check_var(x, "x")
    if not x.shape or x.shape[-1] < 0:
        raise ProgramError(f"fc needs the last dim of '{x.name}' known, got {x.type_str()}")
    w = create_parameter([x.shape[-1], size], x.dtype, name=_param_name(name, "w"))
    out = append("matmul", {"X": x, "Y": w})
    if bias:
        b = create_parameter([size], x.dtype, name=_param_name(name, "b"), initializer=Constant(0.0))
        out = append("elementwise_add", {"X": out, "Y": b})
    return append(act, {"X": out}) if act else out


def dropout(x: Variable, p: float = 0.5, is_test: bool = False, seed: int | None = None, name=None) -> Variable:
    """Zero elements with probability ``p`` in training and scale the rest by 1/(1-p); identity with is_test."""
    program = default_main_program()
    seed = program.next_seed() if seed is None else int(seed)
    out, mask = append("dropout", {"X": check_var(x, "x")}, {"p": p, "is_test": is_test, "seed": seed},
                       out_slots=("Out", "Mask"), name=name)
    mask.stop_gradient = True
    return out


def embedding(ids: Variable, size, dtype="float32", name: str | None = None) -> Variable:
    """Rows of a ``[vocabulary, width]`` table (``size``) at the integers of ``ids``."""
    vocabulary, width = size
    w = create_parameter([vocabulary, width], dtype, name=_param_name(name, "w"))
    return append("lookup_table", {"W": w, "Ids": check_var(ids, "ids")})


def layer_norm(x: Variable, begin_norm_axis: int = -1, epsilon: float = 1e-5, scale: bool = True,
               shift: bool = True, name: str | None = None) -> Variable:
    """Normalize over the dims from ``begin_norm_axis`` on, then scale and shift per element of those dims."""
    check_var(x, "x")
    begin = begin_norm_axis % len(x.shape)
    dims = list(range(begin, len(x.shape)))
    normalized = list(x.shape[begin:])
    if any(d < 0 for d in normalized):
        raise ProgramError(f"layer_norm needs the normalized dims of '{x.name}' known, got {x.type_str()}")
    centred = x - reduce_mean(x, dim=dims, keep_dim=True)
    variance = reduce_mean(centred * centred, dim=dims, keep_dim=True)
    out = centred * power(variance + epsilon, -0.5)
    if scale:
        out = out * create_parameter(normalized, x.dtype, name=_param_name(name, "scale"), initializer=Constant(1.0))
    if shift:
        out = out + create_parameter(normalized, x.dtype, name=_param_name(name, "bias"), initializer=Constant(0.0))
    return out


def _running_stat(like: Variable, name: str, value: float) -> Variable:
    """A persistable, non-trainable per-channel var initialized to ``value`` by the startup program."""
    main, startup = default_main_program(), default_startup_program()
    shape = [like.shape[1]]
    var = main.global_block().create_var(name, shape, like.dtype, persistable=True, stop_gradient=True)
    sblock = startup.global_block()
    sblock.create_var(name, shape, like.dtype, persistable=True, stop_gradient=True)
    sblock.append_op("fill_constant", {}, {"Out": [name]}, {"shape": shape, "dtype": like.dtype, "value": value})
    return var


def batch_norm(x: Variable, momentum: float = 0.9, epsilon: float = 1e-5, is_test: bool = False,
               name: str | None = None) -> Variable:
    """Per-channel (axis 1) normalization by batch statistics in training, running statistics with is_test."""
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
    y_name = program.unique_name(f"{base}.y")
    program.current_block().append_op(
        "batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
        {"Y": [y_name], "MeanOut": [mean.name], "VarianceOut": [var.name]},
        {"momentum": momentum, "epsilon": epsilon, "is_test": is_test})
    return program.current_block().var(y_name)


__all__ = ["fc", "dropout", "embedding", "layer_norm", "batch_norm"]
