"""Dual numbers (value, tangent) for forward-mode derivatives of code written with plain arithmetic: the recurrences'
second order (``ops/recurrence.py`` run on duals gives the Jacobian applied to the inputs' tangents, and its
backward on duals the tangent of the gradients). Any array type with the operators works (numpy's, torch's); what
needs the array library (zeros of a tangent, concatenation, a select, the product where it must be the
reference's) each engine writes over ``value`` and ``Dual``."""
from __future__ import annotations

__all__ = ["Dual", "value"]


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
