"""ONNX's rules for integers the importer computes itself: which indices a ``Slice`` picks, and int64 / int32
arithmetic that wraps as the tensor types do (a Python int grows without bound)."""
from __future__ import annotations

__all__ = ["onnx_slice_range", "wrapped"]

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def onnx_slice_range(start: int, end: int, step: int, size: int) -> range:
    """The indices ONNX's Slice picks along an axis of ``size`` (step not 0): a negative start or end counts from
    the end, then both are clamped, to [0, size] for a positive step, and for a negative one start to
    [0, size - 1] and end to [-1, size - 1] (so INT64_MIN, PyTorch's "down to the first", includes index 0).
    Python's slice differs there: for a negative step a start below -size picks nothing; ONNX starts at 0.

        >>> list(onnx_slice_range(-2 ** 63 + 5, -2 ** 63, -1, 3))
        [0]
    """
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), size), min(max(end, 0), size), step)
    return range(min(max(start, 0), size - 1), min(max(end, -1), size - 1), step)


def wrapped(value: int, dtype: str) -> int:
    """``value`` as an integer tensor of ``dtype`` holds it: modulo 2**bits, signed types two's complement."""
    bits = _BITS.get(dtype)
    if bits is None:
        return value
    value %= 2 ** bits
    return value - 2 ** bits if dtype[0] == "i" and value >= 2 ** (bits - 1) else value
