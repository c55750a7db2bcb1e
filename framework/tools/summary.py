"""A program at a glance: op counts by type and role, parameters, and the bytes of every var."""
from __future__ import annotations

import math
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from .cli_values import ArgumentError
from .text_table import table_lines

__all__ = ["batch_size", "resolve_shape", "summarize", "format_bytes", "summary_text"]


def resolve_shape(shape: Sequence[int], batch: int | None) -> tuple[int, ...] | None:
    """``shape`` with -1 dims replaced by ``batch``; None if some dim stays unknown."""
    if -1 not in shape:
        return tuple(shape)
    return None if batch is None else tuple(batch if d == -1 else d for d in shape)


def batch_size(block, feed_shapes: Mapping[str, Sequence[int]]) -> int | None:
    """The size -1 dims stand for: taken from the first fed var declared with a -1 dim (None if none is fed)."""
    for name, shape in feed_shapes.items():
        var = block.find_var(name)
        if var is not None and -1 in var.shape:
            return int(shape[var.shape.index(-1)])
    return None


def summarize(program, feed_shapes: Mapping[str, Sequence[int]] | None = None) -> dict:
    """Plain data describing ``program``.

    ``feed_shapes`` (name -> shape) fixes the -1 dims: every -1 is taken to be
    the first dim of the first fed shape that replaces a -1 (the batch size).
    """
    block = program.global_block()
    ops_by_type = Counter(op.type for b in program.blocks for op in b.ops)
    ops_by_role = Counter(op.role for b in program.blocks for op in b.ops)
    params = [v for v in program.all_parameters()]
    # Python ints, not np.prod: a [2**32, 2**32] parameter overflowed int64 and showed 0 B.
    param_elems = sum(math.prod(v.shape) for v in params)
    param_bytes = sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize for v in params)
    for name, shape in (feed_shapes or {}).items():
        if any(int(d) < 0 for d in shape):
            raise ArgumentError(f"feed shape of '{name}' has a negative dim: {list(shape)}")
    batch = batch_size(block, feed_shapes or {})
    var_bytes = {}
    for v in block.vars.values():
        shape = resolve_shape(v.shape, batch)
        var_bytes[v.name] = None if shape is None else math.prod(shape) * np.dtype(v.dtype).itemsize
    return {"ops_by_type": dict(sorted(ops_by_type.items())), "ops_by_role": dict(ops_by_role),
            "parameters": len(params), "parameter_elements": param_elems, "parameter_bytes": param_bytes,
            "var_bytes": var_bytes}


def format_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summary_text(program, feed_shapes=None) -> str:
    s = summarize(program, feed_shapes)
    lines = ["ops by role: " + ", ".join(f"{r} {n}" for r, n in s["ops_by_role"].items()),
             "ops by type:"]
    lines += table_lines(["type", "ops"], [[t, str(n)] for t, n in s["ops_by_type"].items()], right=[1],
                         indent="  ")[1:]
    lines.append(f"parameters: {s['parameters']} ({s['parameter_elements']} elements, "
                 f"{format_bytes(s['parameter_bytes'])})")
    lines.append("var bytes" + ("" if feed_shapes else " (-1 dims unresolved: pass --feed-shape)") + ":")
    total = sum(b or 0 for b in s["var_bytes"].values())
    rows = [[name, format_bytes(b)] for name, b in s["var_bytes"].items()] + [["total", format_bytes(total)]]
    lines += table_lines(["var", "bytes"], rows, right=[1], indent="  ")[1:]
    return "\n".join(lines) + "\n"
