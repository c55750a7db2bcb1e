"""``Variable``: a named, typed tensor slot in a block. It holds no data."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .shapes import format_shape

if TYPE_CHECKING:
    from .block import Block


class Variable:
    """A tensor declared in a block: name, shape (-1 = unknown dim), dtype and flags.

    ``persistable`` vars keep their value in the executor's scope across runs
    (parameters, optimizer state). ``stop_gradient`` vars get no gradient.
    Parameters have ``is_parameter`` set; ``trainable`` says whether the
    optimizer should update them.
    """

    __slots__ = ("block", "name", "shape", "dtype", "persistable", "stop_gradient", "is_parameter", "trainable")

    def __init__(self, block: "Block", name: str, shape, dtype: str, persistable: bool = False,
                 stop_gradient: bool = False, is_parameter: bool = False, trainable: bool = True):
        self.block = block
        self.name = name
        self.shape = tuple(map(int, shape))
        self.dtype = dtype
        self.persistable = persistable
        self.stop_gradient = stop_gradient
        self.is_parameter = is_parameter
        self.trainable = trainable

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def type_str(self) -> str:
        """``float64[64, 1000]``: dtype and shape, the way the printer shows them."""
        return f"{self.dtype}{format_shape(self.shape)}"

    def __repr__(self) -> str:
        flags = [f for f in ("persistable", "stop_gradient") if getattr(self, f)]
        if self.is_parameter:
            flags.append("parameter" if self.trainable else "parameter(frozen)")
        extra = (" " + " ".join(flags)) if flags else ""
        return f"Variable({self.name}: {self.type_str()}{extra})"

    # Arithmetic builds ops in the current program through ``program.layers``.
    def __add__(self, other):
        from .layers import math
        return math.add(self, other)

    def __radd__(self, other):
        from .layers import math
        return math.add(other, self)

    def __sub__(self, other):
        from .layers import math
        return math.subtract(self, other)

    def __rsub__(self, other):
        from .layers import math
        return math.subtract(other, self)

    def __mul__(self, other):
        from .layers import math
        return math.multiply(self, other)

    def __rmul__(self, other):
        from .layers import math
        return math.multiply(other, self)

    def __truediv__(self, other):
        from .layers import math
        return math.divide(self, other)

    def __rtruediv__(self, other):
        from .layers import math
        return math.divide(other, self)

    def __pow__(self, other):
        from .layers import math
        return math.pow(self, other)

    def __rpow__(self, other):
        from .layers import math
        return math.pow(other, self)

    def __matmul__(self, other):
        from .layers import linalg
        return linalg.matmul(self, other)

    def __rmatmul__(self, other):
        from .layers import linalg
        return linalg.matmul(other, self)

    def __neg__(self):
        from .layers import math
        return math.scale(self, scale=-1.0)

    __hash__ = object.__hash__
