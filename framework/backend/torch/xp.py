"""The array namespace the torch engine hands to an op's ``compute`` (``OpSchema.compute``): numpy's names for
torch's functions. torch spells some of them otherwise (``dim``/``keepdim``, ``amax``, ``clamp``) and takes no
Python number where numpy does (``maximum(x, 0)``), so each is a small function here rather than ``torch`` itself.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from gradgen.program.ops import OP_SCHEMAS

from ..derive import check
from ..shared.contraction import reference_einsum

__all__ = ["XP", "torch_dtype"]

_DTYPES: dict[np.dtype, torch.dtype] = {}

_NUMPY_FLOATS = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}
"""The float dtypes whose tensors ``.numpy()`` shares with numpy (bfloat16 has no numpy dtype), and numpy's."""


def torch_dtype(dtype) -> torch.dtype:
    """torch's dtype for a numpy dtype (or name); a torch dtype is returned as it is."""
    if isinstance(dtype, torch.dtype):
        return dtype
    dtype = np.dtype(dtype)
    found = _DTYPES.get(dtype)
    if found is None:
        found = _DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype)).dtype
    return found


def _tensor(value, like: torch.Tensor) -> torch.Tensor:
    """``value`` as a tensor: a Python number takes ``like``'s dtype (numpy 2's rule for weak scalars)."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=like.dtype)


def _pair(a, b):
    if not isinstance(a, torch.Tensor):
        return _tensor(a, b), b
    return a, _tensor(b, a)


def _axes(x: torch.Tensor, axis) -> tuple[int, ...] | None:
    if axis is None:
        return None
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)


def _sum(x, axis=None, keepdims=False, dtype=None):
    axes = _axes(x, axis)
    dtype = None if dtype is None else torch_dtype(dtype)
    if axes == ():  # numpy: no axis summed; torch would read () as every axis
        return x if dtype is None else x.to(dtype)
    if axes is None:
        return torch.sum(x, dtype=dtype) if not keepdims else torch.sum(x, dim=tuple(range(x.ndim)), keepdim=True,
                                                                         dtype=dtype)
    return torch.sum(x, dim=axes, keepdim=keepdims, dtype=dtype)


def _prod(x, axis=None, keepdims=False, dtype=None):
    """A product over ``axis``; for floats numpy's, the reference's order of multiplication: a product near the
    largest float overflows in one order and not another (a float64 1.8e308 among 63 normal values: inf on ATen's,
    finite on numpy's). Integers stay on torch's (exact, wrapping as numpy's do)."""
    axes = tuple(range(x.ndim)) if axis is None else _axes(x, axis)
    target = x.dtype if dtype is None else torch_dtype(dtype)
    if target in _NUMPY_FLOATS and x.dtype in _NUMPY_FLOATS:
        return torch.from_numpy(np.asarray(np.prod(x.numpy(), axis=axes, keepdims=keepdims,
                                                   dtype=_NUMPY_FLOATS[target])))
    out = x if dtype is None else x.to(target)
    for a in sorted((a % x.ndim for a in axes), reverse=True):
        out = torch.prod(out, dim=a, keepdim=keepdims)
    return out


def _extreme(fn):
    def reduce(x, axis=None, keepdims=False):
        axes = tuple(range(x.ndim)) if axis is None else _axes(x, axis)
        if axes == ():
            return x
        return fn(x, dim=axes, keepdim=keepdims)
    return reduce


def _bound(a, b) -> bool:
    """Whether ``maximum(a, b)`` or ``minimum`` may clamp tensor ``a`` at the Python number ``b``: a float tensor
    (numpy 2 rounds a weak scalar to its dtype first; clamping, the same comparison in a wider type, then rounds the
    result, which gives the same value, rounding being monotone). One ATen call where the pair is three (the number
    made a tensor, then the comparison): relu's ``maximum(x, 0)`` over ResNet's [32, 64, 32, 32] float32 took
    0.96 ms and ``clamp_min`` 0.84 (ATen's own time, two threads), and over [64, 256] 11.9 us against 5.8."""
    if not (isinstance(a, torch.Tensor) and a.dtype in _NUMPY_FLOATS and type(b) in (int, float)):
        return False
    size = abs(b)  # (torch refuses an int past int64's range and a finite number past the dtype's, which numpy
    # rounds to inf)
    return size <= min(torch.finfo(a.dtype).max, 2.0 ** 62) or size == math.inf or size != size


def _maximum(a, b):
    if _bound(a, b):
        return torch.clamp_min(a, b)
    if _bound(b, a):
        return torch.clamp_min(b, a)
    return torch.maximum(*_pair(a, b))


def _minimum(a, b):
    if _bound(a, b):
        return torch.clamp_max(a, b)
    if _bound(b, a):
        return torch.clamp_max(b, a)
    return torch.minimum(*_pair(a, b))


def _where(cond, a, b):
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        return torch.where(cond, torch.tensor(a), torch.tensor(b))
    return torch.where(cond, *_pair(a, b))


def _binary(fn):
    return lambda a, b: fn(*_pair(a, b))


def _exact_remainder(torch_fn, numpy_fn):
    """A float remainder on numpy's exact ``fmod``/``remainder``: torch's vector kernels gave NaN wherever the
    quotient X / Y overflows (X = 3.4e38, Y = 0.37, float32; X = 1.8e308 in float64), where the remainder is
    an ordinary number smaller than Y (its scalar kernel, for short tensors, was right). Integers stay on torch's
    (exact, and its integer division by zero is what the op's check refuses first)."""
    def run(a, b):
        a, b = _pair(a, b)
        if a.dtype not in _NUMPY_FLOATS:
            return torch_fn(a, b)
        return torch.from_numpy(np.asarray(numpy_fn(a.numpy(), b.numpy())))

    return run


def _running(torch_fn, numpy_fn):
    """A running sum or product along ``axis``, for floats numpy's: ATen's CPU kernels accumulate float32 in
    float64 and round each step's result, so a running product that overflows float32 and comes back in range
    was finite again on torch and stays inf in the reference's float32 accumulation (reduce_prod's gradient,
    ``prod_others``, at a value over 1e38), and long running sums round otherwise. Integers stay on torch's."""
    def run(x, axis, dtype=None):
        dtype = x.dtype if dtype is None else torch_dtype(dtype)
        if dtype not in _NUMPY_FLOATS or x.dtype not in _NUMPY_FLOATS:
            return torch_fn(x, dim=axis, dtype=dtype)
        return torch.from_numpy(np.asarray(numpy_fn(x.numpy(), axis=axis, dtype=_NUMPY_FLOATS[dtype])))

    return run


def _einsum(equation: str, *operands):
    """torch's einsum of one or two operands; of three or more float ones the reference's (``shared/contraction``,
    numpy's pairs in its ``optimize`` order): the order groups the products, and where a value near the largest float
    makes one grouping overflow to inf, another meets inf - inf (``ij,jk,kl->il`` with 3.4e38 in the third
    operand: inf on numpy, NaN in torch's order). Integers wrap alike in any grouping."""
    if len(operands) > 2 and all(o.dtype in _NUMPY_FLOATS for o in operands):
        return torch.from_numpy(np.asarray(reference_einsum(equation, *(o.numpy() for o in operands))))
    return torch.einsum(equation, *operands)


def _isdtype(dtype, kind: str) -> bool:
    if kind == "integral":
        return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
    if kind == "real floating":
        return dtype.is_floating_point
    if kind == "bool":
        return dtype == torch.bool
    raise NotImplementedError(f"isdtype kind {kind!r}")


def _fill(value, dtype: torch.dtype):
    """A fill value rounded once to ``dtype``, as numpy rounds it: torch rounds a Python float to float16 through
    float32, twice (1 + 2**-11 + 2**-40 became 1.0, not 1.0009765625)."""
    return float(np.float16(value)) if dtype == torch.float16 else value


def _full(shape, value, dtype):
    dtype = torch_dtype(dtype)
    return torch.full(tuple(shape), _fill(value, dtype), dtype=dtype)


def _full_like(x, value, dtype=None):
    dtype = x.dtype if dtype is None else torch_dtype(dtype)
    return torch.full_like(x, _fill(value, dtype), dtype=dtype)


def _asarray(value, dtype=None):
    """``value`` as a tensor (of ``dtype`` where given); a Python float rounded once to float16 (``_fill``)."""
    if dtype is None:
        return torch.as_tensor(value)
    dtype = torch_dtype(dtype)
    return torch.as_tensor(_fill(value, dtype) if isinstance(value, float) else value, dtype=dtype)


def _stack(arrays, axis=0):
    return torch.stack(tuple(arrays), dim=axis)


def _pad(x, pad_width, constant_values=0):
    """numpy's constant ``pad``: ``pad_width`` is (before, after) per dim, first dim first (torch's ``F.pad``
    takes them last dim first); ``constant_values`` a number or a 0-d tensor of X's dtype."""
    value = constant_values.item() if isinstance(constant_values, torch.Tensor) else constant_values
    widths = [w for before_after in reversed(pad_width) for w in before_after]
    return torch.nn.functional.pad(x, widths, value=_fill(value, x.dtype))


def _expand_dims(x, axis):
    axes = sorted(a % (x.ndim + len(_axes(x, axis))) for a in _axes(x, axis))
    for a in axes:
        x = torch.unsqueeze(x, a)
    return x


XP = SimpleNamespace(
    permute_dims=lambda x, axes: torch.permute(x, axes),
    add=_binary(torch.add), subtract=_binary(torch.subtract), multiply=_binary(torch.multiply),
    divide=_binary(torch.true_divide), pow=_binary(torch.pow), copysign=_binary(torch.copysign),
    remainder=_exact_remainder(torch.remainder, np.remainder), fmod=_exact_remainder(torch.fmod, np.fmod),
    maximum=_maximum, minimum=_minimum,
    less=_binary(torch.lt), less_equal=_binary(torch.le), greater=_binary(torch.gt), greater_equal=_binary(torch.ge),
    equal=_binary(torch.eq), not_equal=_binary(torch.ne), logical_and=_binary(torch.logical_and),
    logical_or=_binary(torch.logical_or), logical_xor=_binary(torch.logical_xor),
    where=_where, clip=lambda x, lo, hi: torch.clamp(x, lo, hi),
    **{schema.compute.xp_name: getattr(torch, schema.compute.xp_name) for schema in OP_SCHEMAS.values()
       if hasattr(schema.compute, "xp_name") and len(schema.inputs) == 1},
    log1p=torch.log1p, expm1=torch.expm1, floor=torch.floor, isfinite=torch.isfinite, isnan=torch.isnan,
    all=torch.all, check=check,
    sum=_sum, prod=_prod, max=_extreme(torch.amax), min=_extreme(torch.amin),
    reshape=lambda x, shape: torch.reshape(x, tuple(shape)), expand_dims=_expand_dims,
    concat=lambda xs, axis=0: torch.cat(tuple(xs), dim=axis),
    flip=lambda x, axis=None: torch.flip(x, tuple(range(x.ndim)) if axis is None else _axes(x, axis)),
    cumsum=_running(torch.cumsum, np.cumsum), cumprod=_running(torch.cumprod, np.cumprod),
    einsum=_einsum,
    zeros_like=torch.zeros_like, full=_full, full_like=_full_like, nextafter=torch.nextafter, inf=float("inf"),
    tril=lambda x, k=0: torch.tril(x, k), triu=lambda x, k=0: torch.triu(x, k),
    broadcast_to=lambda x, shape: torch.broadcast_to(x, tuple(shape)),
    astype=lambda x, dtype, copy=False: x.to(torch_dtype(dtype)),  # (below)
    asarray=_asarray, stack=_stack, pad=_pad,
    isdtype=_isdtype,
    argmax=lambda x, axis=None, keepdims=False: torch.argmax(x, dim=axis, keepdim=keepdims),
    argmin=lambda x, axis=None, keepdims=False: torch.argmin(x, dim=axis, keepdim=keepdims),
    take_along_axis=lambda x, index, axis: torch.take_along_dim(x, index, dim=axis),
    argsort=lambda x, axis=-1, stable=False: torch.argsort(x, dim=axis, stable=stable),
    sort=lambda x, axis=-1: torch.sort(x, dim=axis).values,
    zeros=lambda shape, dtype=None: torch.zeros(tuple(shape), dtype=None if dtype is None else torch_dtype(dtype)),
    ones=lambda shape, dtype=None: torch.ones(tuple(shape), dtype=None if dtype is None else torch_dtype(dtype)),
    arange=lambda n, dtype=None: torch.arange(n, dtype=None if dtype is None else torch_dtype(dtype)),
    float16=torch.float16, float32=torch.float32, float64=torch.float64, int32=torch.int32, int64=torch.int64,
    bool=torch.bool,
)
"""numpy's names, over torch tensors: a plain namespace, one attribute lookup per function. The unary functions
that are an op's whole compute (``schema.xp_function``) are torch's functions of the same names, but ``sign``
(NaN stays NaN, as numpy and the array API have it). ``astype`` never copies (its ``copy=True`` neither): no
kernel of the engine writes a tensor in place, so a copy is never seen, and the runner copies a view it hands the
scope where that shares or overlaps memory (reduce_mean's gradient, a broadcast view: its copy took 2.3 ms of
ResNet's step)."""
XP.sign = lambda x: torch.where(torch.isnan(x), x, torch.sign(x))  # torch.sign(NaN) is 0; numpy's is NaN
