"""Plain-text tables whose columns are as wide as their widest cell, so long var names never break them."""
from __future__ import annotations

from typing import Sequence

__all__ = ["table_lines"]


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = (),
                indent: str = "") -> list[str]:
    """One line for ``header`` and one per row; the columns in ``right`` (indexes) are right-aligned.

    >>> table_lines(["var", "bytes"], [["x", "8 B"]], right=[1])
    ['var  bytes', 'x      8 B']
    """
    widths = [max(len(str(r[k])) for r in (header, *rows)) for k in range(len(header))]
    last = len(header) - 1

    def line(cells: Sequence[str]) -> str:
        parts = [str(c).rjust(w) if k in right else (str(c) if k == last else str(c).ljust(w))
                 for k, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return [line(header), *(line(r) for r in rows)]
