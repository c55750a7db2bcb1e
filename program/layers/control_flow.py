"""``cond`` and ``while_loop``: Python functions built into sub-blocks owned by one op.

    out = layers.cond(pred, lambda: layers.sigmoid(x), lambda: layers.scale(x, 2.0))
    t, h = layers.while_loop(lambda t, h: layers.less_than(t, steps),
                             lambda t, h: [t + 1, layers.sigmoid(h @ w)], [t0, h0])

The functions run once, at build time, inside a fresh sub-block; the op keeps
the sub-blocks and runs them at run time. Sub-blocks are functional: they
read outer vars (listed in the op's ``Input`` slot) and return new vars;
writing an outer var is an error.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..errors import ProgramError
from ..guard import default_main_program
from ..subblocks import building_block, check_writes_local, external_reads
from ..variable import Variable
from .helper import own_var
from .naming import claim


def _as_results(value, what: str) -> list[Variable]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    for k, v in enumerate(values):
        if not isinstance(v, Variable):
            raise ProgramError(f"{what} must return Variables, but result {k} is {type(v).__name__}")
        own_var(v, f"{what}'s result {k}")
    return values


def _fresh(program, base: str) -> str:
    return base if not program.has_var_anywhere(base) else program.unique_name(base)


def _outer_results(block, names: Sequence[str]) -> list[str]:
    """Results a sub-block returns without making them: outer vars the owning op must pass in."""
    return [n for n in names if n not in block.vars]


def cond(pred: Variable, true_fn: Callable[[], object], false_fn: Callable[[], object], name: str | None = None):
    """The results of ``true_fn()`` if ``pred`` holds at run time, else of ``false_fn()``.

    Both functions are built into their own sub-block and must return the same
    number of vars with matching dtypes and shapes. Returns one var or a tuple; with ``name``, one result is
    ``name`` and several are ``name.0``, ``name.1``, ...
    """
    pred = own_var(pred, "cond's pred")
    if name is not None:  # before the branches are built; their count decides the names claimed below
        claim(name, "cond")
    program = default_main_program()
    parent = program.current_block()
    branches = []
    for fn, what in ((true_fn, "true_fn"), (false_fn, "false_fn")):
        block = program.create_block(parent.idx)
        with building_block(program, block):
            results = _as_results(fn(), f"cond's {what}")
        check_writes_local(block, f"cond's {what}")
        branches.append((block, [v.name for v in results]))
    (t_block, t_outs), (f_block, f_outs) = branches
    if len(t_outs) != len(f_outs):
        raise ProgramError(f"cond's branches return different numbers of vars: true_fn {len(t_outs)} "
                           f"({', '.join(t_outs)}), false_fn {len(f_outs)} ({', '.join(f_outs)})")
    inputs = external_reads([t_block, f_block])
    inputs += [n for n in _outer_results(t_block, t_outs) + _outer_results(f_block, f_outs) if n not in inputs]
    base = name or program.unique_name("cond")
    outs = [base] if len(t_outs) == 1 else [f"{base}.{k}" for k in range(len(t_outs))]
    if name is not None:
        outs = [claim(n, "cond") for n in outs]
    parent.append_op("cond", {"Cond": [pred.name], "Input": inputs}, {"Out": outs},
                     {"true_block": t_block.idx, "false_block": f_block.idx, "true_outs": t_outs,
                      "false_outs": f_outs})
    results = tuple(parent.var(n) for n in outs)
    return results[0] if len(results) == 1 else results


def while_loop(cond_fn: Callable[..., Variable], body_fn: Callable[..., object], loop_vars: Sequence[Variable],
               max_iterations: int | None = None, name: str | None = None) -> list[Variable]:
    """Carry ``loop_vars`` through ``body_fn`` while ``cond_fn`` holds; returns their final values (with ``name``:
    ``name.out0``, ``name.out1``, ...).

    ``cond_fn(*vars)`` returns a bool scalar var and ``body_fn(*vars)`` the
    next value of every loop var, each with the dtype and shape of the loop
    var it replaces. ``max_iterations`` bounds a run (exceeding it is an
    error at run time). The op also records every iteration's loop values
    (``History``), which the gradient reads.
    """
    if isinstance(loop_vars, Variable) or not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise ProgramError("while_loop's loop_vars must be a non-empty list of Variables")
    loop_vars = [own_var(v, f"while_loop's loop_vars[{k}]") for k, v in enumerate(loop_vars)]
    program = default_main_program()
    parent = program.current_block()
    base = name or program.unique_name("while")
    outs = [f"{base}.out{k}" for k in range(len(loop_vars))]
    history = [f"{base}.history{k}" for k in range(len(loop_vars))]
    if name is not None:  # before the sub-blocks are built, so a name used twice leaves the program as it was
        for n in outs + history + [f"{base}.steps"]:
            claim(n, "while_loop")

    def sub_block(fn, role: str):
        block = program.create_block(parent.idx)
        params = [block.create_var(_fresh(program, f"{base}.{role}{k}"), v.shape, v.dtype)
                  for k, v in enumerate(loop_vars)]
        with building_block(program, block):
            results = _as_results(fn(*params), f"while_loop's {role}_fn")
        check_writes_local(block, f"while_loop's {role}_fn")
        return block, [p.name for p in params], [v.name for v in results]

    c_block, c_params, c_outs = sub_block(cond_fn, "cond")
    if len(c_outs) != 1:
        raise ProgramError(f"while_loop's cond_fn must return one bool var, got {len(c_outs)}")
    b_block, b_params, b_outs = sub_block(body_fn, "body")
    if len(b_outs) != len(loop_vars):
        raise ProgramError(f"while_loop's body_fn returns {len(b_outs)} vars for {len(loop_vars)} loop vars "
                           f"({', '.join(v.name for v in loop_vars)})")
    inputs = external_reads([c_block, b_block])
    inputs += [n for n in _outer_results(c_block, c_outs) + _outer_results(b_block, b_outs) if n not in inputs]
    parent.append_op("while", {"X": [v.name for v in loop_vars], "Input": inputs},
                     {"Out": outs, "History": history, "Steps": [f"{base}.steps"]},
                     {"cond_block": c_block.idx, "body_block": b_block.idx, "cond_params": c_params,
                      "cond_out": c_outs[0], "body_params": b_params, "body_outs": b_outs,
                      "max_iterations": max_iterations})
    return [parent.var(n) for n in outs]


__all__ = ["cond", "while_loop"]
