"""Reduction layers."""
from __future__ import annotations

from ..variable import Variable
from .helper import append, check_var
from .naming import named


def _dims(dim) -> list[int]:
    if dim is None:
        return []
    return [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]


def _reduce(op_type: str):
    def layer(x: Variable, dim=None, keep_dim: bool = False, name=None) -> Variable:
        dims = _dims(dim)
        return append(op_type, {"X": check_var(x, "x")},
                      {"dim": dims, "keep_dim": keep_dim, "reduce_all": dim is None}, name=name)

    layer.__name__ = op_type
    layer.__doc__ = f"{op_type[7:]} over ``dim`` (an int, a list, or None for every dim)."
    return named(layer)


reduce_sum = _reduce("reduce_sum")
reduce_mean = _reduce("reduce_mean")
reduce_max = _reduce("reduce_max")
reduce_min = _reduce("reduce_min")
reduce_prod = _reduce("reduce_prod")
logsumexp = _reduce("logsumexp")
logsumexp.__doc__ = "log(sum(exp(x))) over ``dim`` (an int, a list, or None for every dim), computed stably."


@named
def mean(x: Variable, name=None) -> Variable:
    """The mean of every element: a scalar."""
    return append("mean", {"X": check_var(x, "x")}, name=name)


__all__ = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "logsumexp", "mean"]
