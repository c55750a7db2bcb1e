"""The builder's sugar for ``Variable``: ``a + b``, ``a @ w``, ``-a``, ``a > 0``, ``a[:, 0:2]``, ``a.sum()``, ``a.T``.

The IR's ``Variable`` is plain data and imports nothing of the builder. The
operators build ops in the current program, so they belong here, above the
layers they call. ``program/__init__.py`` calls ``install_operators(Variable)``
once, in plain sight, as the last step of assembling the language; nothing
installs itself on import.

    x + 1      builds scale(x, 1.0, 1.0)
    t * 2.5    builds cast(t, float64), then scale: an integer t beside a float number is promoted
    x @ w      builds matmul(x, w)
    -x         builds scale(x, -1.0)   (scale(t, -1) on an integer t: integer numbers stay exact)
    x > 0      builds greater_than(x, fill_constant 0): a bool var (so do <, <=, >=)
    x[:, 1]    builds slice and squeeze (see ``subscript``)
    x.sum(), x.mean(), x.T, x.astype("float32")   reduce_sum, reduce_mean, transpose, cast

``==`` and ``!=`` are not sugar: they compare identity and return a Python
bool, because Variables are dict keys and set members throughout gradgen
(and in users' feed and fetch code), which needs ``==`` to agree with
``hash``. Elementwise equality is ``layers.equal(x, y)``. A Variable has no
truth value at build time, so ``if x > 0:`` is an error rather than a silent
True; ``layers.cond`` branches on a value.
"""
from __future__ import annotations

from ..errors import ProgramError
from . import creation, linalg, logic, manipulation, math, reduction
from .subscript import subscript


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

    def __lt__(self, other):
        return logic.less_than(self, other)

    def __le__(self, other):
        return logic.less_equal(self, other)

    def __gt__(self, other):
        return logic.greater_than(self, other)

    def __ge__(self, other):
        return logic.greater_equal(self, other)

    def __getitem__(self, key):
        return subscript(self, key)

    def __iter__(self):
        raise ProgramError(f"var '{self.name}' is not iterable at build time; index it (x[i]) or split it")

    def __bool__(self):
        raise ProgramError(f"var '{self.name}' has no truth value at build time: use layers.cond or layers.where "
                           "to branch on its value (== and != compare identity)")

    def sum(self, dim=None, keep_dim: bool = False):
        """``layers.reduce_sum(self, dim, keep_dim)``: every dim when ``dim`` is None."""
        return reduction.reduce_sum(self, dim, keep_dim)

    def mean(self, dim=None, keep_dim: bool = False):
        """``layers.reduce_mean(self, dim, keep_dim)``: every dim when ``dim`` is None."""
        return reduction.reduce_mean(self, dim, keep_dim)

    def astype(self, dtype):
        """``layers.cast(self, dtype)``."""
        return creation.cast(self, dtype)

    @property
    def T(self):
        """The dims reversed, as numpy's ``.T``."""
        return manipulation.transpose(self, list(range(self.ndim))[::-1])


OPERATORS = tuple(name for name, f in vars(VariableOperators).items()
                  if (name.startswith("__") and callable(f)) or not name.startswith("_"))
"""The names ``install_operators`` sets: ``__add__``, ``__radd__``, ..., ``__getitem__``, ``sum``, ..., ``T``."""


def install_operators(variable_class: type) -> None:
    """Give ``variable_class`` the operator methods of ``VariableOperators`` (idempotent)."""
    for name in OPERATORS:
        setattr(variable_class, name, vars(VariableOperators)[name])


__all__ = ["VariableOperators", "OPERATORS", "install_operators"]
