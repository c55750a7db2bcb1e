"""The dtypes a Variable may have, as strings, and the families they fall in."""
from __future__ import annotations

from .errors import ProgramError

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
_CANONICAL = frozenset(DTYPES)


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


__all__ = ["FLOAT_DTYPES", "INT_DTYPES", "DTYPES", "is_float", "normalize_dtype"]
