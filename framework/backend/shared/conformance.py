"""Does a run-time value conform to its var's declared type? The one place the runtime asks.

Declared shapes may hold -1 (any size); a run-time value conforms when it is
an ndarray of exactly the declared dtype, of the declared rank, with every
known dim equal. Feeds and scope values are checked on the way in (the fast
``conforms`` against a precomputed ``Declared``, else ``as_declared``, which
converts Python numbers and lists or explains the mismatch); a checking plan
checks every kernel output with ``shape_matches`` (``checks.declared_type``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from gradgen.program.describe import describe_var
from gradgen.program.shapes import format_shape

from ...errors import ExecutionError, FeedError

__all__ = ["Declared", "as_declared", "checked_feeds", "conforms", "declared", "scope_value", "shape_matches"]


class Declared(NamedTuple):
    """A var's declared type, ready for a check of a few attribute reads per value."""

    dtype: np.dtype
    rank: int
    known: tuple[tuple[int, int], ...]
    """(axis, size) of every dim that is not -1."""


def declared(var) -> Declared:
    """``var``'s declared type, worked out once (at plan time)."""
    return Declared(np.dtype(var.dtype), len(var.shape), tuple((a, d) for a, d in enumerate(var.shape) if d != -1))


def conforms(value: Any, want: Declared) -> bool:
    """True when ``value`` is an ndarray of exactly the declared dtype and shape (-1 matches any size)."""
    return type(value) is np.ndarray and has_type(value, want)


def has_type(value: Any, want: Declared) -> bool:
    """True when array ``value`` (any array with a numpy ``dtype`` and a ``shape``: a backend's own, read without
    converting it) has exactly the declared dtype and shape."""
    shape = value.shape
    if value.dtype != want.dtype or len(shape) != want.rank:
        return False
    for a, d in want.known:
        if shape[a] != d:
            return False
    return True


def shape_matches(declared_shape: Sequence[int], actual: Sequence[int]) -> bool:
    """True when run-time shape ``actual`` has the declared rank and every known dim (-1 matches any size)."""
    return len(declared_shape) == len(actual) and all(d == -1 or d == a for d, a in zip(declared_shape, actual))


def as_declared(block, name: str, value: Any, what: str, error: type) -> np.ndarray:
    """``value`` as an array of var ``name``'s declared dtype and shape, or ``error`` saying why it is not.

    Python numbers and lists carry no dtype of their own: they get the
    declared one. An array of another dtype is refused (no silent casts),
    another library's array (a jax array, a tensor with ``__array__``) too.
    """
    var = block.find_var(name)
    if not isinstance(value, (np.ndarray, np.generic)) and hasattr(value, "dtype") and hasattr(value, "shape"):
        try:  # an array with a dtype of its own: read as it is, then checked below
            value = np.asarray(value)
        except Exception as e:  # another library's array that cannot be read (a jax array whose memory is gone)
            raise error(f"{what} '{name}' cannot be read as an array: {type(e).__name__}: {e}") from None
    if not isinstance(value, (np.ndarray, np.generic)):
        try:
            value = np.asarray(value, dtype=var.dtype)
        except (TypeError, ValueError) as e:
            raise error(f"{what} '{name}' cannot be turned into a {var.dtype} array: {e}") from None
    value = np.asarray(value)
    if value.dtype != np.dtype(var.dtype):
        raise error(f"{what} '{name}' has dtype {value.dtype}, but {describe_var(block, name)} is declared; "
                    f"convert it with .astype('{var.dtype}')")
    if not shape_matches(var.shape, value.shape):
        raise error(f"{what} '{name}' has shape {format_shape(value.shape)}, but {describe_var(block, name)} "
                    "is declared (-1 matches any size)")
    return value


def checked_feeds(block, feed: Mapping[str, Any], want: Mapping[str, Declared],
                  own: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """Every feed (even one no op reads) as its var declares it, or the FeedError saying why it is not: what a
    run of any backend does first. A value ``own`` accepts (a compiled backend's array) that has the declared
    type is taken as it is, not converted."""
    return {name: value if conforms(value, want[name]) or (own is not None and own(value)
                                                           and has_type(value, want[name]))
            else as_declared(block, name, value, "feed", FeedError) for name, value in feed.items()}


def scope_value(block, scope, name: str, want: Declared) -> np.ndarray:
    """Persistable ``name``'s value in ``scope`` as its var declares it, or the ExecutionError saying it is missing
    or of another type."""
    if name not in scope:
        raise ExecutionError(f"block {block.idx}: persistable {describe_var(block, name)} is not in the scope (run "
                             "the startup program first, or scope.set it)")
    value = scope[name]
    return value if conforms(value, want) else as_declared(block, name, value, "scope value", ExecutionError)
