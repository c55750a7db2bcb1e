"""jax's and XLA's failures as gradgen's own ``ExecutionError``, naming the op and var where they can.

Three places a run on the xla backend can fail outside a lowering:

- **a shape no machine can hold**: an op output whose byte size overflows int64 makes XLA's compiler abort the
  whole process (``overflow in static extent product``, a C++ ``terminate``, no Python exception), so the
  trace refuses it first (``refuse_impossible_size``), naming the op and the var;
- **the compile** (``compile_failed``): XLA refusing the traced program;
- **the call** (``run_failed``): chiefly an allocation XLA cannot make (``RESOURCE_EXHAUSTED: Out of memory
  allocating N bytes``). XLA does not say which op wanted the memory; the trace recorded every op output's
  size (``TraceContext.sizes``), so the error names the ops whose output is exactly N bytes, else the largest
  outputs, with the run's input shapes.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from gradgen.program.errors import GradgenError
from gradgen.program.shapes import format_shape

from ...errors import ExecutionError

__all__ = ["MAX_BYTES", "compile_failed", "refuse_impossible_size", "run_failed"]

MAX_BYTES = 2 ** 63 - 1
"""The most bytes an array may take: XLA counts them in int64 (and aborts the process past it)."""

_ALLOCATING = re.compile(r"allocat\w* (\d+) bytes")
_NAMED = 3
"""How many of the largest outputs an allocation failure names when none has exactly the size XLA asked for."""


def _nbytes(shape: Sequence[int], dtype) -> int:
    return int(np.prod([int(d) for d in shape], dtype=object)) * np.dtype(dtype).itemsize


def _size_text(n: int) -> str:
    for unit, power in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        size = 2 ** power
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def refuse_impossible_size(where: str, name: str, shape: Sequence[int], dtype) -> int:
    """The byte size of op output ``name`` (at ``where``), or the ExecutionError saying it cannot exist."""
    n = _nbytes(shape, dtype)
    if n > MAX_BYTES:
        raise ExecutionError(f"{where}: makes {name} {np.dtype(dtype).name}{format_shape(tuple(shape))}, "
                             f"{n} bytes: more than any array can hold (at most {MAX_BYTES})")
    return n


def _what(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _inputs(names: Sequence[str], values: Sequence[Any]) -> str:
    shown = [f"{n} {np.dtype(v.dtype).name}{format_shape(tuple(v.shape))}" for n, v in zip(names, values)]
    return ", ".join(shown) or "none"


def compile_failed(block, error: BaseException) -> BaseException:
    """``error`` (raised while tracing or compiling block 0) as gradgen's: a GradgenError stays as it is."""
    if isinstance(error, GradgenError):
        return error
    return ExecutionError(f"block {block.idx}: the xla backend could not compile the run: {_what(error)}")


def _suspects(sizes: Sequence[tuple[str, str, tuple, Any, int]], wanted: int | None) -> list[str]:
    """The op outputs an allocation of ``wanted`` bytes most likely was: exactly that size, else the largest."""
    exact = [s for s in sizes if wanted is not None and s[4] == wanted]
    chosen = exact or sorted(sizes, key=lambda s: -s[4])[:_NAMED]
    return [f"{where} makes {name} {np.dtype(dtype).name}{format_shape(shape)} ({_size_text(n)})"
            for where, name, shape, dtype, n in chosen]


def run_failed(block, error: BaseException, sizes: Sequence[tuple], names: Sequence[str],
               values: Sequence[Any], lost: Sequence[str]) -> BaseException:
    """``error`` (raised by the compiled call of block 0) as gradgen's ExecutionError: what XLA said, the ops that
    most likely caused it (``sizes``: every traced output's (where, var, shape, dtype, bytes)), the run's inputs
    (``names``, ``values``), and the scope values the failed call had already taken (``lost``)."""
    if isinstance(error, GradgenError):
        return error
    found = _ALLOCATING.search(str(error))
    wanted = int(found.group(1)) if found else None
    text = f"block {block.idx}: the xla run failed: {_what(error)}"
    if wanted is not None or "RESOURCE_EXHAUSTED" in str(error):
        suspects = _suspects(sizes, wanted)
        if suspects:
            exact = wanted is not None and any(s[4] == wanted for s in sizes)
            text += ("\n  the op output of that size: " if exact else "\n  the largest op outputs: ")
            text += "; ".join(suspects)
    text += f"\n  run inputs: {_inputs(names, values)}"
    if lost:
        text += (f"\n  the failed call had taken the memory of scope value(s) {', '.join(lost)}, which are lost: "
                 "reload them (load_params) or run the startup program again")
    else:
        text += "\n  nothing was committed: the scope is as it was before the run"
    return ExecutionError(text)
