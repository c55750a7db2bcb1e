"""``Variable``: a named, typed tensor slot in a block. It holds no data and builds no ops.

The operators ``a + b``, ``a @ b``, ``-a`` ... belong to the builder: ``program/layers/operators.py``
defines them and ``program/__init__.py`` installs them on this class (see design_docs/ir.md).
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from .errors import ProgramError
from .shapes import format_shape

if TYPE_CHECKING:
    from .block import Block


def _fixed(name: str, doc: str) -> property:
    """A read-only field: changing a declared name or type would silently disagree with the ops already typed."""
    def refuse(var: "Variable", value) -> None:
        raise ProgramError(f"block {var.block.idx}: var '{var.name}' ({var.type_str()}) has a fixed {name}; "
                           "declare a new var instead")
    return property(operator.attrgetter("_" + name), refuse, doc=doc)


def _flag(name: str, doc: str) -> property:
    """A bool flag whose changes bump the program's version, so the executor's cached plans see them."""
    slot = "_" + name

    def set_flag(var: "Variable", value) -> None:
        if not isinstance(value, bool):
            raise ProgramError(f"block {var.block.idx}: var '{var.name}'.{name} must be True or False, "
                               f"got {value!r}")
        if getattr(var, slot) is not value:
            setattr(var, slot, value)
            var.block.program._touch()
    return property(operator.attrgetter(slot), set_flag, doc=doc)


class Variable:
    """A tensor declared in a block: name, shape (-1 = unknown dim), dtype and flags.

    ``persistable`` vars keep their value in the executor's scope across runs
    (parameters, optimizer state). ``stop_gradient`` vars get no gradient.
    Parameters have ``is_parameter`` set; ``trainable`` says whether the
    optimizer should update them. The flags may be set at any time (setting
    one bumps the program's version); name, shape and dtype are fixed.
    """

    __slots__ = ("block", "_name", "_shape", "_dtype", "_persistable", "_stop_gradient", "_is_parameter",
                 "_trainable")

    def __init__(self, block: "Block", name: str, shape, dtype: str, persistable: bool = False,
                 stop_gradient: bool = False, is_parameter: bool = False, trainable: bool = True):
        self.block = block
        self._name = name
        self._shape = tuple(map(int, shape))
        self._dtype = dtype
        self._persistable = persistable
        self._stop_gradient = stop_gradient
        self._is_parameter = is_parameter
        self._trainable = trainable

    name = _fixed("name", "The var's name, unique in its block.")
    shape = _fixed("shape", "A tuple of dims; -1 is a size known only at run time.")
    dtype = _fixed("dtype", "One of ``program.dtypes.DTYPES``.")
    persistable = _flag("persistable", "Kept in the executor's scope across runs.")
    stop_gradient = _flag("stop_gradient", "No gradient flows into this var.")
    is_parameter = _flag("is_parameter", "A parameter of the model (created by ``layers.create_parameter``).")
    trainable = _flag("trainable", "For a parameter: whether optimizers update it.")

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def type_str(self) -> str:
        """``float64[64, 1000]``: dtype and shape, the way the printer shows them."""
        return f"{self._dtype}{format_shape(self._shape)}"

    def __repr__(self) -> str:
        flags = [f for f in ("persistable", "stop_gradient") if getattr(self, f)]
        if self.is_parameter:
            flags.append("parameter" if self.trainable else "parameter(frozen)")
        extra = (" " + " ".join(flags)) if flags else ""
        return f"Variable({self.name}: {self.type_str()}{extra})"

    __hash__ = object.__hash__


def var_names(items, what: str, error: type[Exception] = ProgramError) -> list[str]:
    """The names of ``items``: one name or Variable, or a sequence of them (what every API that takes var names
    accepts); ``error`` (raised with ``what`` named) for anything else."""
    if isinstance(items, (str, bytes, Variable)) or not isinstance(items, (list, tuple)):
        items = [items]
    names = []
    for item in items:
        name = item.name if isinstance(item, Variable) else item
        if not isinstance(name, str):
            raise error(f"{what} must be Variables or var names, got {type(item).__name__}")
        names.append(name)
    return names


__all__ = ["Variable", "var_names"]
