"""Where a generated op comes from, in words: the one rule the printer, the explain page and DOT share.

A grad op names the forward op it was made for (``Operator.forward_op``). A
``sum`` that accumulates a gradient names the ops that wrote the partial
gradients it adds, and an optimizer op names the op that made the gradient it
consumes: both are read from the dataflow of the block, so they survive
save and load unchanged.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple


class Provenance(NamedTuple):
    """``kind`` is ``grad``, ``recompute``, ``sum``, ``update``, ``seed`` or ``none``; ``refs`` are (block, index) of the ops it
    points at; ``text`` is what the printer shows after ``<-``."""

    kind: str
    refs: tuple[tuple[int, int], ...]
    text: str


def producers(block) -> dict[str, int]:
    """Var name -> index of the last op of ``block`` writing it (one pass)."""
    return {n: i for i, op in enumerate(block.ops) for n in op.output_arg_names}


def _ref_text(ref: tuple[int, int] | None, here: int) -> str:
    if ref is None:
        return "?"
    return f"#{ref[1]}" if ref[0] == here else f"block {ref[0]} #{ref[1]}"


def op_provenance(op, index: int, positions: Mapping[int, tuple[int, int]], made_by: Mapping[str, int]) -> Provenance:
    """What generated op ``op`` (at ``index`` in its block) was made for.

    ``positions`` maps ``id(op)`` to (block, index) for every op of the program;
    ``made_by`` is ``producers(op.block)``.
    """
    here = op.block.idx
    if op.type == "sum" and op.role == "backward":
        parts = op.input("X")
        refs = tuple((here, made_by[n]) for n in parts if made_by.get(n, index) < index)
        target = op.output("Out")[0] if op.output("Out") else "?"
        where = ", ".join(_ref_text(r, here) for r in refs) or "outside this block"
        return Provenance("sum", refs, f"accumulates {len(parts)} contributions to {target} from {where}")
    if op.role == "optimize" and op.input("Grad"):
        grad = op.input("Grad")[0]
        k = made_by.get(grad)
        refs = ((here, k),) if k is not None and k < index else ()
        return Provenance("update", refs, f"applies {grad}" + (f" from {_ref_text(refs[0], here)}" if refs else ""))
    if op.forward_op is not None and op.type == op.forward_op.type and op.output_arg_names and all(
            n.endswith("@RECOMPUTE") for n in op.output_arg_names):
        ref = positions.get(id(op.forward_op))
        return Provenance("recompute", (ref,) if ref else (), f"recomputes {_ref_text(ref, here)} {op.type}")
    if op.forward_op is not None:
        ref = positions.get(id(op.forward_op))
        kind = "tangent" if op.role == "forward_grad" else "grad"
        return Provenance(kind, (ref,) if ref else (), f"{kind} of {_ref_text(ref, here)} {op.forward_op.type}")
    if op.role == "backward" and op.type == "fill_any_like" and op.input("X"):
        target = op.input("X")[0]
        k = made_by.get(target)
        refs = ((here, k),) if k is not None and k < index else ()
        return Provenance("seed", refs, f"seeds the gradient of {target} with ones")
    return Provenance("none", (), "")


__all__ = ["Provenance", "op_provenance", "producers"]
