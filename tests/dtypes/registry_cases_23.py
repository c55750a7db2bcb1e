"""Registry cases for the ops of issue 23: tril/triu, flatten, einsum, sort/argsort (see ``registry_cases``)."""
from __future__ import annotations

import string

from .registry_builders import Built, Draw, one_op


def _triangle(g: Draw) -> Built:
    shape = g.shape(min_rank=2)
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"diagonal": g.int(-4, 4)})


def _flatten(g: Draw) -> Built:
    shape = g.shape()
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axis": g.int(-len(shape), len(shape))})


def _einsum(g: Draw) -> Built:
    """One to three operands over letters of a few sizes (some 1, so they broadcast), each term with or without
    an ellipsis for up to two shared leading dims, and an explicit or implicit result."""
    dtype = g.dtype("Operands")
    letters = string.ascii_lowercase[:g.int(1, 5)]
    sizes = {c: g.int(0, 3) for c in letters}
    lead = [g.int(0, 3) for _ in range(g.int(0, 2))]
    terms, xs, dots = [], [], False
    for _ in range(g.int(1, 3)):
        term = "".join(c for c in letters if g.flag())
        with_dots = bool(lead) and g.flag()
        dims = lead[len(lead) - g.int(0, len(lead)):] if with_dots else []
        shape = [d if g.int(0, 3) else 1 for d in dims] + [sizes[c] if g.int(0, 3) else 1 for c in term]
        terms.append(("..." if with_dots else "") + term)
        xs.append(g.array(shape, dtype))
        dots = dots or with_dots
    used = sorted(set("".join(terms)) - {"."})
    equation = ",".join(terms)
    if g.flag():
        equation += "->" + ("..." if dots and g.flag() else "") + "".join(c for c in used if g.flag())
    return one_op(g, {"Operands": xs}, {"equation": equation})


def _sorting(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    return one_op(g, {"X": g.array(shape, g.dtype("X"))},
                  {"axis": g.int(-len(shape), len(shape) - 1), "descending": g.flag()})


CASES_23 = {"tril": _triangle, "triu": _triangle, "flatten": _flatten, "einsum": _einsum, "sort": _sorting,
            "argsort": _sorting}
"""op type -> the builder of one valid case of it."""

__all__ = ["CASES_23"]
