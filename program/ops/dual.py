"""Dual numbers (value, tangent) for forward-mode derivatives of code written with plain arithmetic: the recurrences'
second order (``ops/recurrence.py`` run on duals gives the Jacobian applied to the inputs' tangents, and its
backward on duals the tangent of the gradients). Any array type with the operators works (numpy's, torch's); what
needs the array library (zeros of a tangent, concatenation, a select, the product where it must be the
reference's) each engine writes over ``value`` and ``Dual``."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

__all__ = ["Dual", "dual_ops", "value"]


class Dual:
    """A value with a tangent; arithmetic, matmul, indexing and the gate functions carry the tangent along."""

    __array_ufunc__ = None  # numpy hands ``array op dual`` to the dual's reflected method
    __slots__ = ("v", "d")

    def __init__(self, v, d):
        self.v, self.d = v, d

    @property
    def shape(self):
        return self.v.shape

    @property
    def T(self):  # noqa: N802 -- numpy's name
        return Dual(self.v.T, self.d.T)

    def __add__(self, o):
        return Dual(self.v + o.v, self.d + o.d) if isinstance(o, Dual) else Dual(self.v + o, self.d)

    __radd__ = __add__

    def __neg__(self):
        return Dual(-self.v, -self.d)

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __mul__(self, o):
        if isinstance(o, Dual):
            return Dual(self.v * o.v, self.d * o.v + self.v * o.d)
        return Dual(self.v * o, self.d * o)

    __rmul__ = __mul__

    def __matmul__(self, o):
        if isinstance(o, Dual):
            return Dual(self.v @ o.v, self.d @ o.v + self.v @ o.d)
        return Dual(self.v @ o, self.d @ o)

    def __rmatmul__(self, o):
        return Dual(o @ self.v, o @ self.d)

    def __getitem__(self, key):
        return Dual(self.v[key], self.d[key])

    def sum(self, axis):
        return Dual(self.v.sum(axis), self.d.sum(axis))

    def reshape(self, *shape):
        return Dual(self.v.reshape(*shape), self.d.reshape(*shape))


def value(a):
    """The value of a dual (a plain array is its own value)."""
    return a.v if isinstance(a, Dual) else a


def dual_ops(lib) -> SimpleNamespace:
    """The operations the recurrences need beyond arithmetic, on arrays and duals, over an array library ``lib``
    (``zeros_like``, ``zeros(shape, like)``, ``concat(parts, axis)``, ``stack(parts)``, ``where(cond, a, b)``,
    ``matmul(a, b)``, ``exp``): each engine that runs duals gives its own library and gets these, written once.
    ``tangent(a)`` is zeros for a plain array; ``lifted(fn, slope)`` is an elementwise ``fn`` whose tangent is
    ``slope`` written in its result times the input's."""
    def tangent(a):
        return a.d if isinstance(a, Dual) else lib.zeros_like(a)

    def linear(fn):
        """``fn``, a linear map of a list of arrays, on a list that may hold duals: values and tangents alike."""
        def apply(parts, *args):
            if any(isinstance(p, Dual) for p in parts):
                return Dual(fn([value(p) for p in parts], *args), fn([tangent(p) for p in parts], *args))
            return fn(parts, *args)
        return apply

    def mm(a, b):
        """The product, in the order of terms ``Dual.__matmul__`` has."""
        if isinstance(a, Dual):
            if isinstance(b, Dual):
                return Dual(lib.matmul(a.v, b.v), lib.matmul(a.d, b.v) + lib.matmul(a.v, b.d))
            return Dual(lib.matmul(a.v, b), lib.matmul(a.d, b))
        if isinstance(b, Dual):
            return Dual(lib.matmul(a, b.v), lib.matmul(a, b.d))
        return lib.matmul(a, b)

    def where(cond, a, b):
        """A select of arrays or duals (``b`` may be a number: its tangent 0)."""
        if isinstance(a, Dual) or isinstance(b, Dual):
            b_tangent = tangent(b) if isinstance(b, Dual) or hasattr(b, "shape") else 0.0
            return Dual(lib.where(cond, value(a), value(b)), lib.where(cond, tangent(a), b_tangent))
        return lib.where(cond, a, b)

    def lifted(fn: Callable, slope: Callable) -> Callable:
        def apply(a):
            if isinstance(a, Dual):
                y = apply(a.v)
                return Dual(y, a.d * slope(y))
            return fn(a)
        return apply

    return SimpleNamespace(tangent=tangent, concat=linear(lib.concat), stack=linear(lib.stack), where=where, mm=mm,
                           zeros=lambda shape, like: lib.zeros(shape, value(like)), exp=lifted(lib.exp, lambda e: e),
                           lifted=lifted)
