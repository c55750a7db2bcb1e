"""``ParamAttr``: how a layer should create one parameter (name, initializer, trainable), as Paddle spells it.

Layers take ``param_attr=`` / ``bias_attr=`` in any of Paddle's forms:
a ``ParamAttr``, a name (``"fc1.w"``), an initializer (``Constant(0.0)``),
None (defaults) or, for a bias, ``False`` (no bias at all).

>>> layers.fc(input=x, size=10, param_attr=ParamAttr(name="w", initializer=Normal(0.0, 0.01)), bias_attr=False)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ProgramError


@dataclass(frozen=True)
class ParamAttr:
    """A parameter's name (None: the layer names it), initializer (None: the layer's default) and trainability.

    Paddle's per-parameter ``learning_rate`` and ``regularizer`` are not
    supported (say so with an error rather than ignore them): use the
    optimizer's ``weight_decay`` instead.
    """

    name: str | None = None
    initializer: Any = None
    trainable: bool = True
    learning_rate: float = 1.0
    regularizer: Any = None

    def __post_init__(self):
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ProgramError(f"ParamAttr name must be a non-empty string, got {self.name!r}")
        if self.initializer is not None and not callable(getattr(self.initializer, "op", None)):
            raise ProgramError(f"ParamAttr initializer must be an initializer (Constant, Normal, Uniform, ...), "
                               f"got {type(self.initializer).__name__}")
        if self.learning_rate != 1.0 or self.regularizer is not None:
            raise ProgramError("ParamAttr learning_rate and regularizer are not supported: use the optimizer's "
                               "learning rate and weight_decay")


def to_param_attr(value: Any, what: str) -> ParamAttr | None:
    """Any of Paddle's spellings of a parameter attribute as a ParamAttr; None for ``False`` (no parameter)."""
    if value is False:
        return None
    if value is None or value is True:
        return ParamAttr()
    if isinstance(value, ParamAttr):
        return value
    if isinstance(value, str):
        return ParamAttr(name=value)
    if callable(getattr(value, "op", None)):
        return ParamAttr(initializer=value)
    raise ProgramError(f"{what} must be a ParamAttr, a name, an initializer, None or False, "
                       f"got {type(value).__name__}")


__all__ = ["ParamAttr", "to_param_attr"]
