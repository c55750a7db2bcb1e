"""The checks a checking plan runs on every step's outputs: NaN/Inf, and the declared dtype and shape.

A check is a plain function ``check(where, var, value, inputs)``: ``where``
names the op (``block 0, op #3 (log), created at ...``), ``var`` is the
output's Variable, ``value`` its run-time array, and ``inputs()`` describes
the step's inputs for a message. It returns the error to raise, or None.
``PlanOptions(checks=...)`` lists the checks; the plan builder wraps each
step's function in ``checked``, so a plan without checks runs exactly the
unchecked loop, and sub-plans, compiled with the same options, are checked
too.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gradgen.program.describe import op_location
from gradgen.program.errors import GradgenError
from gradgen.program.shapes import format_shape

from ...errors import ExecutionError, NanInfError
from ..shared.conformance import shape_matches

__all__ = ["CheckFailed", "OutputCheck", "checked", "declared_type", "describe_inputs", "finite"]

OutputCheck = Callable[[str, Any, np.ndarray, Callable[[], str]], "GradgenError | None"]


class CheckFailed(Exception):
    """Raised by a checked step whose output failed a check; ``run_plan`` raises ``error``, the public one.

    A separate type, so that the run loop can tell this step's own check
    failure from a checked error coming out of a sub-block the step ran.
    """

    def __init__(self, error: GradgenError):
        super().__init__(str(error))
        self.error = error


def describe_inputs(op, values: Mapping[str, Any]) -> str:
    """``X=x: float64[64, 1000], Y=w: <released>``: an op's inputs as they are in ``values``."""
    parts = []
    for slot, names in op.inputs.items():
        for n in names:
            v = values.get(n)
            got = f"{np.asarray(v).dtype}{format_shape(np.shape(v))}" if v is not None else "<released>"
            parts.append(f"{slot}={n}: {got}")
    return ", ".join(parts) or "no inputs"


def finite(where: str, var, value: np.ndarray, inputs: Callable[[], str]) -> NanInfError | None:
    """A NanInfError when float or complex ``value`` holds a NaN or an Inf."""
    if value.dtype.kind not in "fc" or np.isfinite(value).all():
        return None
    bad = "NaN" if np.isnan(value).any() else "Inf"
    return NanInfError(f"{where} produced {bad} in output {var.name} ({value.dtype}{format_shape(value.shape)}); "
                       f"inputs: {inputs()}")


def declared_type(where: str, var, value: np.ndarray, inputs: Callable[[], str]) -> ExecutionError | None:
    """An ExecutionError when ``value`` breaks the dtype or shape its var declares (-1 matches any size)."""
    if value.dtype.name == var.dtype and shape_matches(var.shape, value.shape):
        return None
    return ExecutionError(f"{where}: its kernel returned {value.dtype.name}{format_shape(value.shape)} for output "
                          f"{var.name}, declared {var.type_str()}")


def checked(fn: Callable[..., Any], block, index: int, ins: Sequence[str], outs: Sequence[str],
            checks: Sequence[OutputCheck]) -> Callable[..., Any]:
    """``fn`` (op ``index``'s step function, reading ``ins`` and making ``outs``) followed by ``checks`` on
    each output; a failure raises CheckFailed."""
    op = block.ops[index]
    where = op_location(block, index, op.type, op.callsite)
    out_vars = [block.var(n) for n in outs]
    single = len(outs) == 1

    def run(*args):
        result = fn(*args)
        values = (result,) if single else tuple(result)
        for var, value in zip(out_vars, values):
            value = np.asarray(value)
            for check in checks:
                error = check(where, var, value, lambda: describe_inputs(op, dict(zip(ins, args))))
                if error is not None:
                    raise CheckFailed(error)
        return result

    return run
