"""``fluid.layers.While``: Paddle's imperative loop, rebuilt as gradgen's functional ``while_loop``.

    i = fluid.layers.fill_constant([1], "int64", 0)
    cond = fluid.layers.less_than(i, n)
    loop = fluid.layers.While(cond)
    with loop.block():
        fluid.layers.assign(fluid.layers.sigmoid(h), h)
        fluid.layers.increment(i, in_place=True)
        fluid.layers.less_than(i, n, cond=cond)

Paddle's body writes outer vars in place. gradgen's sub-blocks may not, so the
body is first recorded in a scratch block; every outer var it writes becomes a
loop var (``cond`` must be one), and the recorded ops are replayed in
``while_loop``'s body with each write renamed to a fresh var and each later
read following it. After the loop, ``assign`` ops give the outer vars their final
values, so code after the loop reads them by the same names, as in Paddle.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from gradgen.program import layers as _layers
from gradgen.program.errors import ProgramError
from gradgen.program.guard import default_main_program
from gradgen.program.subblocks import building_block, owned_blocks
from gradgen.program.variable import Variable

__all__ = ["While"]


class While:
    """``While(cond)``: ``with loop.block():`` records a body that runs while ``cond`` (a bool var the body
    rewrites, e.g. with ``less_than(..., cond=cond)``) holds."""

    def __init__(self, cond: Variable, is_test: bool = False, name: str | None = None):
        if not isinstance(cond, Variable) or cond.dtype != "bool" or any(d > 1 for d in cond.shape):
            raise ProgramError(f"While's cond must be a bool scalar Variable, got {cond!r}")
        self.cond, self.name = cond, name

    @contextmanager
    def block(self) -> Iterator[None]:
        program = default_main_program()
        parent = program.current_block()
        scratch = program.create_block(parent.idx)
        try:
            with building_block(program, scratch):
                yield
            ops, local = list(scratch.ops), set(scratch.vars)
        finally:
            program.remove_blocks([scratch.idx])
        _build_loop(parent, ops, local, self.cond, self.name)


def _written_outer_vars(ops, local: set[str]) -> list[str]:
    """Outer vars the recorded body writes, in first-write order: the loop's carried values."""
    found: dict[str, None] = {}
    for k, op in enumerate(ops):
        if owned_blocks(op):
            raise ProgramError(f"While body op #{k} ({op.type}) owns sub-blocks; fluid's While replays flat "
                               "bodies only (use layers.while_loop and layers.cond)")
        for name in op.output_arg_names:
            if name not in local:
                found[name] = None
    return list(found)


def _build_loop(parent, ops, local: set[str], cond: Variable, name: str | None) -> None:
    carried = _written_outer_vars(ops, local)
    if cond.name not in carried:
        raise ProgramError(f"While body never writes its cond '{cond.name}', so the loop would not end; update it "
                           f"in the body (less_than(..., cond={cond.name}))")
    program = parent.program

    def body(*params):
        current = {n: p.name for n, p in zip(carried, params)}
        block = program.current_block()
        for op in ops:
            inputs = {slot: [current.get(n, n) for n in names] for slot, names in op.inputs.items()}
            outputs = {}
            for slot, names in op.outputs.items():
                for n in names:
                    if n in current or n not in local:
                        current[n] = program.unique_name(f"{n}@while")
                    else:
                        current[n] = n
                outputs[slot] = [current[n] for n in names]
            block.append_op(op.type, inputs, outputs, dict(op.attrs), callsite=op.callsite)
        return [block.var(current[n]) for n in carried]

    index = carried.index(cond.name)
    finals = _layers.while_loop(lambda *params: params[index], body, [parent.var(n) for n in carried], name=name)
    for n, final in zip(carried, finals):
        parent.append_op("assign", {"X": [final.name]}, {"Out": [n]})
