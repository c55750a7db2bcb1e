"""Einsum equations as plain data: one string of index letters per operand and one for the result.

    parse_einsum("...ij,...jk", [3, 2])  ->  Equation(terms=('Aij', 'jk'), out='Aik')

The operands' ranks are known when a program is built, so an ellipsis stands for a known number of
dims: ``parse_einsum`` spells it with unused capital letters, aligned from the right as numpy
broadcasts (an operand with fewer ellipsis dims gets the last letters). Without ``->`` the result is
numpy's: the ellipsis dims, then the letters used once, in alphabetical order. A letter repeated
inside one term (a trace or a diagonal, ``ii->``) is refused: its gradient would have to write a
diagonal, which no einsum can. Schema, kernel, gradient and ONNX lowering all read the same
``Equation``, so they cannot disagree about what an equation means.
"""
from __future__ import annotations

import string
from functools import lru_cache
from typing import NamedTuple, Sequence

__all__ = ["Equation", "EinsumError", "parse_einsum", "spell"]

_LETTERS = frozenset(string.ascii_letters)


class EinsumError(ValueError):
    """An equation that does not fit its operands (the schema turns it into the op's error)."""


class Equation(NamedTuple):
    terms: tuple[str, ...]
    out: str

    def text(self) -> str:
        """The explicit equation, letters only: what numpy and ONNX are given."""
        return ",".join(self.terms) + "->" + self.out


def spell(terms: Sequence[str], out: str) -> str:
    """An explicit equation from its terms and result."""
    return Equation(tuple(terms), out).text()


def _split_term(term: str, where: str) -> tuple[str, str, bool]:
    """(letters before '...', letters after, whether '...' is there), refusing anything else."""
    if term.count("...") > 1 or term.replace("...", "").count(".") or not set(term.replace(".", "")) <= _LETTERS:
        raise EinsumError(f"{where} '{term}' must be letters with at most one '...'")
    head, dots, tail = term.partition("...")
    return head, tail, bool(dots)


@lru_cache(maxsize=1024)
def _parse(equation: str, ranks: tuple[int, ...]) -> Equation:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    raw = lhs.split(",")
    if len(raw) != len(ranks):
        raise EinsumError(f"equation '{equation}' has {len(raw)} operand terms for {len(ranks)} operands")
    parts = [_split_term(t, f"term {k}") for k, t in enumerate(raw)]
    used = set(eq) & _LETTERS
    spare = [c for c in string.ascii_uppercase[::-1] + string.ascii_lowercase[::-1] if c not in used]
    widths = []
    for k, ((head, tail, dots), rank) in enumerate(zip(parts, ranks)):
        width = rank - len(head) - len(tail)
        if width < 0 or (width and not dots):
            raise EinsumError(f"term {k} '{raw[k]}' names {len(head) + len(tail)} dims, operand {k} has rank {rank}")
        widths.append(width)
    ellipsis = "".join(spare[:max(widths, default=0)][::-1])
    terms = tuple(head + ellipsis[len(ellipsis) - w:] + tail for (head, tail, _), w in zip(parts, widths))
    for k, term in enumerate(terms):
        repeated = sorted({c for c in term if term.count(c) > 1})
        if repeated:
            raise EinsumError(f"term {k} '{raw[k]}' repeats {''.join(repeated)} (traces and diagonals are not "
                              "supported: their gradient writes a diagonal)")
    if arrow:
        head, tail, dots = _split_term(rhs, "the result")
        out = head + (ellipsis if dots else "") + tail
        if dots and not any(d for *_, d in parts):
            raise EinsumError(f"the result '{rhs}' has '...' but no operand does")
        missing = sorted({c for c in out if not any(c in t for t in terms)})
        if missing:
            raise EinsumError(f"the result '{rhs}' names {''.join(missing)}, which no operand has")
        if len(set(out)) != len(out):
            raise EinsumError(f"the result '{rhs}' repeats a letter")
    else:
        named = "".join(terms)
        once = sorted(c for c in set(named) if named.count(c) == 1 and c not in ellipsis)
        out = ellipsis + "".join(once)
    return Equation(terms, out)


def parse_einsum(equation: str, ranks: Sequence[int]) -> Equation:
    """The explicit-letter form of ``equation`` for operands of ``ranks``; ``EinsumError`` if they do not fit."""
    return _parse(equation, tuple(int(r) for r in ranks))
