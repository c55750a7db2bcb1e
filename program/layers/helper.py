"""The functions every layer uses to append an op: ``append`` makes new output vars, ``append_into`` writes an
existing one."""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ProgramError
from ..guard import default_main_program
from ..validate import own_name
from ..variable import Variable
from .naming import claim


def append(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
           out_slots: Sequence[str] = ("Out",), name: str | None = None, stop_gradient: bool = False,
           side: str | None = None):
    """Append ``op_type`` to the current block; returns its new output var (or a tuple, one per slot).

    The first slot's var is ``name`` if given, else ``{op_type}_{k}`` made unique in the program; the other
    slots' are ``{side}.{slot}`` (lowercase), ``side`` defaulting to the first var's name (so ``loss`` makes
    ``loss.mask``). Every output is a new var: a given name the program already has is a ProgramError
    (``append_into`` writes an existing var).
    """
    program = default_main_program()
    block = program.current_block()
    base = name or program.unique_name(op_type)
    names = {slot: base if i == 0 else f"{side or base}.{slot.lower()}" for i, slot in enumerate(out_slots)}
    if name is not None or side is not None:
        for n in names.values():
            claim(n, op_type)
    block.append_op(op_type, inputs, {s: [n] for s, n in names.items()}, attrs or {})
    outs = tuple(block.var(n) for n in names.values())
    if stop_gradient:
        for v in outs:
            v.stop_gradient = True
    return outs[0] if len(outs) == 1 else outs


def append_into(op_type: str, inputs: dict[str, Any], out: Variable, attrs: dict[str, Any] | None = None,
                slot: str = "Out") -> Variable:
    """Append ``op_type`` writing its output ``slot`` into ``out``, a var of the program being built; returns it.

    For the in-place updates Paddle code makes: ``assign(x, output)``, ``increment(in_place=True)``,
    ``less_than(cond=)`` in a ``While`` body.
    """
    name = own_var(out, f"{op_type}'s output").name
    block = default_main_program().current_block()
    block.append_op(op_type, inputs, {slot: [name]}, attrs or {})
    return block.var(name)


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


__all__ = ["append", "append_into", "check_var", "own_var"]
