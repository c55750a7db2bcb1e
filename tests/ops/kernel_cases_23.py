"""Kernel cases for the ops of issue 23 (tril, triu, flatten, einsum, sort, argsort), each checked against a
computation written from the definition with loops, in float32 and float64 and with ints where the op takes them;
size-1 and zero-size dims, ties, and broadcasting included."""
from __future__ import annotations

import itertools

import numpy as np

from tests.framework.op_harness import Case

rng = np.random.default_rng(23)
FLOATS = ("float32", "float64")


def _arr(shape, dtype):
    if dtype in ("int32", "int64"):
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dtype)


def _triangle_ref(x, k, upper):
    out = np.zeros_like(x)
    for pos in np.ndindex(x.shape):
        i, j = pos[-2:]
        if (j - i >= k) if upper else (j - i <= k):
            out[pos] = x[pos]
    return out


def _flatten_ref(x, axis):
    rows = 1
    for d in x.shape[:axis]:
        rows *= d
    flat = [x[pos] for pos in np.ndindex(x.shape)]  # row-major order
    cols = len(flat) // rows if rows else int(np.prod(x.shape[axis:]))
    return np.array(flat, x.dtype).reshape(rows, cols)


def manipulation_cases():
    for dtype in FLOATS + ("int32", "int64", "bool"):
        for shape, k in [((4, 4), 0), ((3, 5), 1), ((2, 3, 4), -1), ((5, 3), 2), ((1, 1), 0), ((2, 0, 3), 0),
                         ((3, 2), -5), ((2, 4), 7)]:
            x = _arr(shape, dtype)
            for op, upper in (("tril", False), ("triu", True)):
                yield Case(op, {"X": x}, lambda i, k=k, u=upper: _triangle_ref(i["X"], k, u), {"diagonal": k},
                           label=f"{dtype},{shape},k={k}")
        for shape, axis in [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -1), ((5,), 1), ((), 0),
                            ((2, 0, 3), 2), ((2, 0, 3), 1)]:
            yield Case("flatten", {"X": _arr(shape, dtype)},
                       lambda i, a=axis: _flatten_ref(i["X"], a + i["X"].ndim if a < 0 else a),
                       {"axis": axis}, label=f"{dtype},{shape},axis={axis}")


def _einsum_ref(terms, out, xs):
    """The sum over every assignment of the letters of the product of the operands' elements (size-1 dims
    broadcast)."""
    sizes = {}
    for term, x in zip(terms, xs):
        for c, d in zip(term, x.shape):
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
    letters = sorted(sizes)
    result = np.zeros([sizes[c] for c in out], dtype=np.float64 if xs[0].dtype.kind == "f" else xs[0].dtype)
    for values in itertools.product(*(range(sizes[c]) for c in letters)):
        at = dict(zip(letters, values))
        prod = 1
        for term, x in zip(terms, xs):
            prod = prod * x[tuple(at[c] if x.shape[p] != 1 else 0 for p, c in enumerate(term))]
        result[tuple(at[c] for c in out)] += prod
    return result


EINSUMS = [  # equation, shapes, the explicit-letter terms and result the reference uses
    ("ij,jk->ik", [(2, 3), (3, 4)], ["ij", "jk"], "ik"),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)], ["bij", "bjk"], "bik"),
    ("ij,jk", [(2, 3), (3, 1)], ["ij", "jk"], "ik"),
    ("ij->ji", [(2, 3)], ["ij"], "ji"),
    ("ij->", [(2, 3)], ["ij"], ""),
    ("ij->j", [(2, 3)], ["ij"], "j"),
    ("i,j->ij", [(3,), (2,)], ["i", "j"], "ij"),
    ("i,i->", [(4,), (4,)], ["i", "i"], ""),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)], ["ABij", "Bjk"], "ABik"),
    ("...ij,jk", [(2, 2, 3), (3, 2)], ["Aij", "jk"], "Aik"),
    ("ij,jk,kl->il", [(2, 3), (3, 1), (4, 2)], ["ij", "jk", "kl"], "il"),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)], ["bhqd", "bhkd"], "bhqk"),
    ("ij,jk->ik", [(2, 0), (0, 3)], ["ij", "jk"], "ik"),
    ("ij,jk->ik", [(0, 2), (2, 3)], ["ij", "jk"], "ik"),
    ("i...->...", [(3, 2)], ["iA"], "A"),
    ("ba", [(2, 3)], ["ba"], "ab"),
]


def linalg_cases():
    for dtype in FLOATS + ("int64",):
        for eq, shapes, terms, out in EINSUMS:
            xs = [_arr(s, dtype) for s in shapes]
            yield Case("einsum", {"Operands": xs}, lambda i, t=terms, o=out: _einsum_ref(t, o, i["Operands"]),
                       {"equation": eq}, label=f"{dtype},{eq},{shapes}")


def _sort_ref(x, axis, descending):
    moved = np.moveaxis(x, axis, -1)
    values, indices = np.zeros_like(moved), np.zeros(moved.shape, np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        row = moved[pos]
        order = sorted(range(len(row)), key=lambda j: (-float(row[j]) if descending else float(row[j]), j))
        indices[pos], values[pos] = order, row[order]
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


def sorting_cases():
    for dtype in FLOATS + ("int32", "int64", "bool"):
        ties = np.array([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2], [5, 4, 3, 2, 1]]).astype(dtype)
        for x, axis, descending in [(ties, -1, False), (ties, -1, True), (ties, 0, True), (ties, 0, False),
                                    (_arr((2, 3, 4), dtype), 1, True), (_arr((3, 1), dtype), 1, False),
                                    (_arr((2, 0, 3), dtype), 1, True), (_arr((2, 0, 3), dtype), 2, False),
                                    (_arr((4,), dtype), 0, True)]:
            attrs = {"axis": axis, "descending": descending}
            label = f"{dtype},{list(x.shape)},axis={axis},descending={descending}"
            yield Case("sort", {"X": x}, lambda i, a=attrs: dict(zip(("Out", "Indices"), (
                [r] for r in _sort_ref(i["X"], a["axis"] % i["X"].ndim, a["descending"])))), attrs, label=label)
            yield Case("argsort", {"X": x}, lambda i, a=attrs: {"Indices": [
                _sort_ref(i["X"], a["axis"] % i["X"].ndim, a["descending"])[1]]}, attrs, label=label)


OPS23_CASES = [*manipulation_cases(), *linalg_cases(), *sorting_cases()]

__all__ = ["OPS23_CASES", "EINSUMS"]
