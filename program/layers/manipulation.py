"""Layers that reshape, reorder, join and split tensors."""
from __future__ import annotations

from typing import Sequence

from ..errors import ProgramError
from ..guard import default_main_program
from ..variable import Variable
from .helper import append, check_var
from .naming import claim, named


@named
def sum(xs: Sequence[Variable], name=None) -> Variable:
    """xs[0] + xs[1] + ... for vars of one shape."""
    xs = list(xs)
    if not xs:
        raise ProgramError("sum needs at least one var")
    return append("sum", {"X": [check_var(x, "xs[i]") for x in xs]}, name=name)


@named
def broadcast_to(x: Variable, shape: Sequence[int], name=None) -> Variable:
    """x broadcast (numpy rules) to ``shape``."""
    return append("broadcast_to", {"X": check_var(x, "x")}, {"shape": list(shape)}, name=name)


@named
def reshape(x: Variable, shape: Sequence[int], name=None) -> Variable:
    """x with a new shape of the same size; one dim may be -1 (inferred), 0 copies x's dim."""
    return append("reshape", {"X": check_var(x, "x")}, {"shape": list(shape)}, name=name)


@named
def transpose(x: Variable, perm: Sequence[int], name=None) -> Variable:
    return append("transpose", {"X": check_var(x, "x")}, {"perm": list(perm)}, name=name)


@named
def concat(xs: Sequence[Variable], axis: int = 0, name=None) -> Variable:
    xs = list(xs)
    if not xs:
        raise ProgramError("concat needs at least one var")
    return append("concat", {"X": [check_var(x, "xs[i]") for x in xs]}, {"axis": axis}, name=name)


def split(x: Variable, num_or_sections, axis: int = 0, name=None) -> list[Variable]:
    """x cut along ``axis`` into ``num_or_sections`` equal pieces, or pieces of the listed sizes, named
    ``name.0``, ``name.1``, ... (``split_k.0``, ... without ``name``)."""
    check_var(x, "x")
    if isinstance(num_or_sections, int):
        if not -len(x.shape) <= axis < len(x.shape):
            raise ProgramError(f"split: axis {axis} is out of range for '{x.name}' of rank {len(x.shape)}")
        size = x.shape[axis]
        if size < 0:
            raise ProgramError(f"split: axis {axis} of '{x.name}' has unknown size; give the section sizes")
        if num_or_sections <= 0 or size % num_or_sections:
            raise ProgramError(f"split: axis {axis} of '{x.name}' (size {size}) does not divide into "
                               f"{num_or_sections} equal pieces")
        sections = [size // num_or_sections] * num_or_sections
    else:
        sections = [int(s) for s in num_or_sections]
    program = default_main_program()
    base = name or program.unique_name("split")
    names = [f"{base}.{i}" if name is None else claim(f"{name}.{i}", "split") for i in range(len(sections))]
    block = program.current_block()
    block.append_op("split", {"X": x}, {"Out": names}, {"axis": axis, "sections": sections})
    return [block.var(n) for n in names]


@named
def slice(x: Variable, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
          strides: Sequence[int] | None = None, name=None) -> Variable:
    """x[starts:ends:strides] along each of ``axes`` (Python slicing rules; strides default to 1, may be negative)."""
    return append("slice", {"X": check_var(x, "x")}, {"axes": list(axes), "starts": list(starts), "ends": list(ends),
                                                     "strides": list(strides or [])}, name=name)


@named
def pad(x: Variable, paddings: Sequence[int], pad_value: float = 0.0, name=None) -> Variable:
    """x with ``paddings[2i]`` elements of ``pad_value`` before and ``paddings[2i+1]`` after it along dim i."""
    return append("pad", {"X": check_var(x, "x")}, {"paddings": list(paddings), "pad_value": pad_value}, name=name)


@named
def cumsum(x: Variable, axis: int = -1, exclusive: bool = False, reverse: bool = False, name=None) -> Variable:
    """Running sums along ``axis``: from the end when ``reverse``, without the element itself when ``exclusive``."""
    return append("cumsum", {"X": check_var(x, "x")}, {"axis": axis, "exclusive": exclusive, "reverse": reverse},
                  name=name)


@named
def squeeze(x: Variable, axes: Sequence[int] = (), name=None) -> Variable:
    return append("squeeze", {"X": check_var(x, "x")}, {"axes": list(axes)}, name=name)


@named
def unsqueeze(x: Variable, axes: Sequence[int], name=None) -> Variable:
    return append("unsqueeze", {"X": check_var(x, "x")}, {"axes": list(axes)}, name=name)


@named
def stack(xs: Sequence[Variable], axis: int = 0, name=None) -> Variable:
    xs = list(xs)
    if not xs:
        raise ProgramError("stack needs at least one var")
    return append("stack", {"X": [check_var(x, "xs[i]") for x in xs]}, {"axis": axis}, name=name)


@named
def gather(x: Variable, index: Variable, axis: int = 0, name=None) -> Variable:
    """x's slices at the integers of ``index`` along ``axis``."""
    return append("gather", {"X": check_var(x, "x"), "Index": check_var(index, "index")}, {"axis": axis}, name=name)


@named
def flatten(x: Variable, axis: int = 1, name=None) -> Variable:
    """x as a matrix: the dims before ``axis`` multiplied into the rows, the rest into the columns (Paddle's
    ``fluid.layers.flatten``, ONNX Flatten; ``axis`` may be 0 or the rank, giving a single row or column)."""
    return append("flatten", {"X": check_var(x, "x")}, {"axis": axis}, name=name)


@named
def tril(x: Variable, diagonal: int = 0, name=None) -> Variable:
    """x's lower triangle in its last two dims (above diagonal ``diagonal`` set to 0; k > 0 keeps more)."""
    return append("tril", {"X": check_var(x, "x")}, {"diagonal": diagonal}, name=name)


@named
def triu(x: Variable, diagonal: int = 0, name=None) -> Variable:
    """x's upper triangle in its last two dims (below diagonal ``diagonal`` set to 0; k < 0 keeps more)."""
    return append("triu", {"X": check_var(x, "x")}, {"diagonal": diagonal}, name=name)


__all__ = [
    "sum", "broadcast_to", "reshape", "transpose", "concat", "split", "slice", "squeeze", "unsqueeze", "stack",
    "gather", "pad", "cumsum", "flatten", "tril", "triu"
]
