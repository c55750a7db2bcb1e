"""The dtypes a Variable may have, as strings, the families they fall in, and which values each can hold."""
from __future__ import annotations

import math

from .errors import ProgramError

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
"""The dtypes arithmetic accepts: bool is for logic (``where``, ``cond``) and counting (``mean``, ``reduce_sum``)."""
DTYPES = NUMERIC_DTYPES + ("bool",)
_CANONICAL = frozenset(DTYPES)
_INT_RANGE = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1), "bool": (0, 1)}
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def is_float(dtype: str) -> bool:
    """True for the dtypes that carry gradients."""
    return dtype in FLOAT_DTYPES


def normalize_dtype(dtype) -> str:
    """Accept a dtype string or anything numpy understands; return one of ``DTYPES``."""
    if type(dtype) is str and dtype in _CANONICAL:
        return dtype
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or getattr(dtype, "__name__", str(dtype))
    if name == "float":
        name = "float64"
    if name == "int":
        name = "int64"
    if name not in DTYPES:
        raise ProgramError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return name


def describe_dtypes(dtypes) -> str:
    """``a float tensor``, ``int32 or int64``, or the list: how an error names what a slot accepts."""
    dtypes = tuple(dtypes)
    if dtypes == FLOAT_DTYPES:
        return "a float tensor"
    return ", ".join(dtypes[:-1]) + (" or " if len(dtypes) > 1 else "") + dtypes[-1]


def unrepresentable(value: int | float, dtype: str) -> str | None:
    """Why a Python number cannot be stored exactly in ``dtype``, or None when it can.

    Integer dtypes (and bool, as 0 or 1) take whole numbers in their range;
    float dtypes take inf, NaN and any number up to their largest finite
    value (rounded to the nearest, as every float is; a larger finite number
    would silently become inf).
    """
    lo_hi = _INT_RANGE.get(dtype)
    if lo_hi is not None:
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            return f"{value!r} is not a whole number, which {dtype} needs"
        if not lo_hi[0] <= value <= lo_hi[1]:
            return f"{value!r} is outside the range of {dtype} [{lo_hi[0]}, {lo_hi[1]}]"
        return None
    if math.isfinite(value) and abs(value) > _FLOAT_MAX[dtype]:
        return f"{value!r} is beyond the largest finite {dtype}"
    return None


__all__ = ["FLOAT_DTYPES", "INT_DTYPES", "NUMERIC_DTYPES", "DTYPES", "is_float", "normalize_dtype", "describe_dtypes",
           "unrepresentable"]
