"""The builder's operator sugar for ``Variable``: ``a + b``, ``2 * a``, ``a @ w``, ``a ** 2``, ``-a``.

The IR's ``Variable`` is plain data and imports nothing of the builder. The
operators build ops in the current program, so they belong here, above the
layers they call. ``program/__init__.py`` calls ``install_operators(Variable)``
once, in plain sight, as the last step of assembling the language; nothing
installs itself on import.

    x + 1      builds scale(x, 1.0, 1.0)
    t * 2.5    builds cast(t, float64), then scale: an integer t beside a float number is promoted
    x @ w      builds matmul(x, w)
    -x         builds scale(x, -1.0)   (scale(t, -1) on an integer t: integer numbers stay exact)
"""
from __future__ import annotations

from . import linalg, math


class VariableOperators:
    """The operator methods ``install_operators`` copies onto ``Variable``; each calls one layer."""

    __slots__ = ()

    def __add__(self, other):
        return math.add(self, other)

    def __radd__(self, other):
        return math.add(other, self)

    def __sub__(self, other):
        return math.subtract(self, other)

    def __rsub__(self, other):
        return math.subtract(other, self)

    def __mul__(self, other):
        return math.multiply(self, other)

    def __rmul__(self, other):
        return math.multiply(other, self)

    def __truediv__(self, other):
        return math.divide(self, other)

    def __rtruediv__(self, other):
        return math.divide(other, self)

    def __pow__(self, other):
        return math.pow(self, other)

    def __rpow__(self, other):
        return math.pow(other, self)

    def __matmul__(self, other):
        return linalg.matmul(self, other)

    def __rmatmul__(self, other):
        return linalg.matmul(other, self)

    def __neg__(self):
        return math.negative(self)


OPERATORS = tuple(name for name, f in vars(VariableOperators).items() if name.startswith("__") and callable(f))
"""The dunder names ``install_operators`` sets: ``__add__``, ``__radd__``, ..., ``__neg__``."""


def install_operators(variable_class: type) -> None:
    """Give ``variable_class`` the operator methods of ``VariableOperators`` (idempotent)."""
    for name in OPERATORS:
        setattr(variable_class, name, vars(VariableOperators)[name])


__all__ = ["VariableOperators", "OPERATORS", "install_operators"]
