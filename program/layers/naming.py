"""``name=`` names what a layer returns: the rule every layer of ``program.layers`` follows, applied in one place.

``layers.fc(x, 10, name="logits")`` returns a var called ``logits`` and makes the parameters ``logits.w`` and
``logits.b``; ``layers.softmax_with_cross_entropy(..., reduction="mean", name="loss")`` returns ``loss`` and
names its softmax ``loss.softmax``. A layer body names its parameters and side outputs from ``name``; the
``named`` decorator does the rest, so a body whose last op has an automatic name needs no care:

- before the body runs, ``claim`` checks the name is free: a name the program already has is a ProgramError
  that says which var has it (a fetch by name must find one var, and two ops writing one var would silently
  break the program's dataflow);
- after it, when the var the layer returns still has an automatic name, the one op this call appended that
  writes it is made to write ``name`` instead (a rename: no extra op); a returned var this call did not make
  (a layer that hands back its input unchanged) is copied into ``name`` by an ``assign``.

A layer that returns a tuple names its first item (``top_k``: values ``NAME``, indices ``NAME.indices``).
Layers whose results are a list of pieces (``split``, ``while_loop``, ``cond`` with several results) name them
``NAME.0``, ``NAME.1``, ... themselves, claiming each. ``design_docs/names.md`` lists, for every layer, what
``name=`` names; ``names_table`` generates that list by building each layer.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, TypeVar

from ..block import Block
from ..describe import op_location
from ..errors import ProgramError
from ..guard import default_main_program
from ..program import Program
from ..variable import Variable

_Layer = TypeVar("Layer", bound=Callable)


def _whose(program: Program, name: str) -> str:
    """What the var ``name`` of ``program`` is and where it comes from, for the message of a name used twice."""
    for block in program.blocks:
        var = block.vars.get(name)
        if var is None:
            continue
        for index, op in enumerate(block.ops):
            if name in op.output_arg_names:
                return f"{var.type_str()}, made by {op_location(block, index, op.type, op.callsite)}"
        kind = "a parameter" if var.is_parameter else "a var no op writes (an input)"
        return f"{var.type_str()}, {kind} of block {block.idx}"
    return "unknown"


def claim(name: str, layer: str) -> str:
    """``name``, once it is known to be a non-empty string that no var of the program being built has."""
    if not isinstance(name, str) or not name:
        raise ProgramError(f"{layer}: name must be a non-empty string, got {name!r}")
    program = default_main_program()
    if program.has_var_anywhere(name):
        raise ProgramError(f"{layer}(name={name!r}): the program already has a var named {name!r} "
                           f"({_whose(program, name)}); a name names one var: choose another name, or leave "
                           "name= out for an automatic one")
    return name


def _renamed(var: Variable, name: str, block: Block, start: int) -> Variable | None:
    """``var`` declared again as ``name``, written by the op that made it, when that op is one of
    ``block.ops[start:]`` (this call's) and none of them reads it; otherwise None."""
    if var.block is not block or var.persistable or var.is_parameter:
        return None
    ops = block.ops[start:]
    writers = [op for op in ops if var.name in op.output_arg_names]
    if len(writers) != 1 or any(var.name in op.input_arg_names for op in ops):
        return None
    old = var.name
    block.remove_var(old)
    renamed = block.create_var(name, var.shape, var.dtype, stop_gradient=var.stop_gradient)
    (op,) = writers
    op.outputs = {slot: [name if n == old else n for n in names] for slot, names in op.outputs.items()}
    return renamed


def give_name(result, name: str, block: Block, start: int):
    """``result`` (a var, or a tuple whose first item is the var) with that var called ``name``."""
    first = result[0] if isinstance(result, tuple) and result else result
    if not isinstance(first, Variable) or first.name == name:
        return result
    var = _renamed(first, name, block, start)
    if var is None:
        block.append_op("assign", {"X": [first.name]}, {"Out": [name]})
        var = block.var(name)
        var.stop_gradient = first.stop_gradient
    return (var, *result[1:]) if isinstance(result, tuple) else var


def _name_position(layer: Callable) -> int | None:
    """Where ``name`` sits among ``layer``'s positional parameters (None: keyword only)."""
    for position, parameter in enumerate(inspect.signature(layer).parameters.values()):
        if parameter.name == "name":
            return position if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else None
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
    raise TypeError(f"{layer.__name__} takes no name= to apply the naming rule to")


def named(layer: _Layer) -> _Layer:
    """``layer`` under the naming rule: with ``name=NAME`` it returns a var called NAME (see the module doc)."""
    position = _name_position(layer)

    @functools.wraps(layer)
    def call(*args, **kwargs):
        name = args[position] if position is not None and len(args) > position else kwargs.get("name")
        if name is None:
            return layer(*args, **kwargs)
        claim(name, layer.__name__)
        block = default_main_program().current_block()
        start = len(block.ops)
        return give_name(layer(*args, **kwargs), name, block, start)

    return call


__all__ = ["claim", "give_name", "named"]
