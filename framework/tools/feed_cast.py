"""``--cast``: a feed converted to its var's declared dtype, only when the conversion keeps what the data says.

numpy makes float64 and ``layers.data`` declares float32, so a saved array
often has a wider dtype than the program reads. The executor never converts
(a silent cast hides mistakes); on the command line ``--cast`` asks for it, by
this rule:

- floating point to floating point is done (numpy's ``can_cast(..., "same_kind")``):
  narrowing rounds each value to the nearest one of the declared dtype, the
  precision the program computes in anyway; a finite value that becomes
  infinite (``1e300`` as float32) is refused;
- any other conversion (an integer-valued float64 label to int64, int64 to
  int32 or float32, anything to bool) is done only when every value comes back
  unchanged: ``3.0`` becomes the label ``3``, while ``3.5`` (truncated), ``2**40``
  as int32 (wrapped) or ``2**53 + 1`` as float64 (rounded) are refused, naming
  the first value that would change.
"""
from __future__ import annotations

import warnings

import numpy as np

from gradgen.program.errors import GradgenError

__all__ = ["CastError", "cast_feed"]


class CastError(GradgenError):
    """A feed whose values would change if converted to its var's declared dtype."""


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _refuse(name: str, value: np.ndarray, cast: np.ndarray, mask: np.ndarray, why: str) -> CastError:
    at = _first(mask)
    where = f" at {list(at)}" if at else ""
    return CastError(f"--cast: feed '{name}' cannot become {cast.dtype} without changing it: "
                     f"{value[at].item()!r}{where} would become {cast[at].item()!r} ({why})")


def cast_feed(name: str, value: np.ndarray, dtype: str) -> np.ndarray:
    """``value`` as ``dtype`` by the module's rule, or a CastError naming the first value the cast would change."""
    want = np.dtype(dtype)
    if value.dtype == want:
        return value
    with warnings.catch_warnings():  # overflow and a complex value's dropped imaginary part are checked below
        warnings.simplefilter("ignore")
        cast = value.astype(want)
        if value.dtype.kind == "f" and want.kind == "f":
            overflow = np.isfinite(value) & ~np.isfinite(cast)
            if overflow.any():
                raise _refuse(name, value, cast, overflow, f"out of {want}'s range")
            return cast
        back = cast.astype(value.dtype)
    changed = back != value
    if value.dtype.kind in "fc":
        changed &= ~(np.isnan(back) & np.isnan(value))  # NaN stays NaN: that is no change
    if changed.any():
        raise _refuse(name, value, cast, changed, "of the conversions --cast makes, only float narrowing rounds")
    return cast
