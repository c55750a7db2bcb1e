"""The one function every layer uses to append an op and get its output vars."""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ProgramError
from ..guard import default_main_program
from ..validate import own_name
from ..variable import Variable


def append(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
           out_slots: Sequence[str] = ("Out",), name: str | None = None, stop_gradient: bool = False):
    """Append ``op_type`` to the current block; returns its output var (or a tuple, one per slot).

    Output names are ``name`` (if given, for a single output) or
    ``{op_type}_{k}`` made unique in the program; extra output slots get a
    ``.{slot}`` suffix.
    """
    program = default_main_program()
    block = program.current_block()
    base = name or program.unique_name(op_type)
    names = {slot: base if i == 0 else f"{base}.{slot.lower()}" for i, slot in enumerate(out_slots)}
    block.append_op(op_type, inputs, {s: [n] for s, n in names.items()}, attrs or {})
    outs = tuple(block.var(n) for n in names.values())
    if stop_gradient:
        for v in outs:
            v.stop_gradient = True
    return outs[0] if len(outs) == 1 else outs


def check_var(value, what: str) -> Variable:
    if not isinstance(value, Variable):
        raise ProgramError(f"{what} must be a Variable, got {type(value).__name__}")
    return value


def own_var(value, what: str) -> Variable:
    """``value``, a Variable of the program being built (``check_var`` plus ``own_name``'s program check): for
    layers that pass a var on by name, out of ``append_op``'s sight."""
    var = check_var(value, what)
    own_name(default_main_program().current_block(), var, what)
    return var


__all__ = ["append", "check_var", "own_var"]
