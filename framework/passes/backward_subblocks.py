"""Building the gradient sub-blocks that control-flow makers describe (``grad_makers.builder.SubBlock``).

A maker of a control-flow op returns an ``OpDesc`` whose ``block`` attrs are
``SubBlock`` recordings. Here the backward pass carries them out: it creates
each block under the forward op's block, declares its parameters, appends its
ops in order (copies of forward blocks, recorded ops, and a backward pass run
inside the block for a ``Differentiate`` step), fills in symbolic zeros, and
prunes what the block's results do not need. Then the op's attrs and its
``Input`` slot are resolved to block indices and var names.

A gradient the inner pass does not produce is a symbolic zero: adding it is
free (``elementwise_add`` with a zero operand is its other operand), and any
other read materializes it once as ``fill_zeros_like``.
"""
from __future__ import annotations

from gradgen.grad_makers.builder import CopyOps, CopyVars, Differentiate, OpDesc, ReadsOf, Ref, RuleError, SubBlock
from gradgen.program.subblocks import copy_ops, copy_vars, external_reads, prune_unused


class _Builder:
    """Carries out the sub-blocks of the op descriptions one maker call returned."""

    def __init__(self, backward_pass, ctx, fwd):
        self.backward_pass = backward_pass
        self.ctx = ctx
        self.fwd = fwd
        self.program = fwd.block.program

    def read(self, block, value) -> str:
        """The name of ``value`` inside ``block``, materializing a symbolic zero there on first read."""
        if type(value) is not Ref:
            self.declare_pending(value)
            return value
        if value.name is None:
            if value.zero_like is None:
                raise RuleError(f"sub-block {block.idx} reads {value!r} before anything in it makes that value")
            value.name = self.ctx.tmp("zeros")
            block.append_op("fill_zeros_like", {"X": [value.zero_like]}, {"Out": [value.name]}, role="backward")
        return value.name

    def declare_pending(self, name: str) -> None:
        """An outer gradient the forward op's maker was handed is declared before a sub-block reads it."""
        output = self.ctx.pending.get(name)
        if output is not None and not self.fwd.block.has_var(name):
            var = self.fwd.block.var(output)
            self.fwd.block.create_var(name, var.shape, var.dtype)

    def append(self, block, desc: OpDesc) -> None:
        if desc.type == "elementwise_add":
            x, y = desc.inputs["X"][0], desc.inputs["Y"][0]
            (out,) = desc.outputs["Out"]
            for zero, other in ((x, y), (y, x)):
                if type(zero) is Ref and zero.name is None and zero.zero_like is not None:
                    if type(other) is Ref and other.name is None:
                        out.zero_like = other.zero_like
                    else:
                        out.name = self.read(block, other)
                    return
        ins = {slot: [self.read(block, v) for v in values] for slot, values in desc.inputs.items()}
        outs = {}
        for slot, values in desc.outputs.items():
            for v in values:
                if type(v) is Ref:
                    v.name = self.ctx.tmp(v.prefix())
            outs[slot] = [v.name if type(v) is Ref else v for v in values]
        block.append_op(desc.type, ins, outs, desc.attrs, role="backward")

    def differentiate(self, block, step: Differentiate) -> None:
        """Run the backward pass inside ``block``; targets not made by an op there (or repeated) get an assign copy."""
        made = {n for op in block.ops for n in op.output_arg_names}
        targets, seeds = [], []
        for target, seed in zip(step.targets, step.seeds):
            if seed is None:
                continue
            target = self.read(block, target)
            if target not in made or target in targets:
                copy = self.ctx.tmp("target")
                block.append_op("assign", {"X": [target]}, {"Out": [copy]}, role="backward")
                target = copy
            targets.append(target)
            seeds.append(self.read(block, seed))
        grads = self.backward_pass.nested(block, targets, seeds, step.wrt) if targets else [None] * len(step.wrt)
        for ref, grad, wrt in zip(step.results, grads, step.wrt):
            if grad is None:
                ref.zero_like = wrt
            else:
                ref.name = grad

    def build(self, sub: SubBlock) -> None:
        block = self.program.create_block(self.fwd.block.idx)
        sub.idx = block.idx
        for ref, var_type in sub.params:
            ref.name = self.ctx.tmp(ref.prefix())
            block.create_var(ref.name, var_type.shape, var_type.dtype)
        for step in sub.descs:
            if type(step) is CopyVars:
                copy_vars(self.program.block(step.block), block)
            elif type(step) is CopyOps:
                copy_ops(self.program.block(step.block), block)
            elif type(step) is Differentiate:
                self.differentiate(block, step)
            else:
                self.append(block, step)
        results = [self.read(block, v) for v in sub.results]
        prune_unused(block, results, [ref.name for ref, _ in sub.params])

    def resolve(self, desc: OpDesc) -> None:
        """Build ``desc``'s sub-blocks, then put block indices and names where the recording had placeholders."""
        for value in desc.attrs.values():
            if type(value) is SubBlock:
                self.build(value)
        desc.attrs = {k: _resolved(v) for k, v in desc.attrs.items()}
        for slot, values in desc.inputs.items():
            if values and type(values[0]) is ReadsOf:
                desc.inputs[slot] = external_reads([self.program.block(b.idx) for b in values[0].blocks])


def _resolved(value):
    if type(value) is SubBlock:
        return value.idx
    if type(value) is Ref:
        return value.name
    if type(value) is list:
        return [_resolved(v) for v in value]
    return value


def build_sub_blocks(backward_pass, ctx, fwd, descs: list[OpDesc]) -> None:
    """Carry out every ``SubBlock`` in ``descs`` (the recording of one maker call), in order."""
    builder = _Builder(backward_pass, ctx, fwd)
    for desc in descs:
        if any(type(v) is SubBlock for v in desc.attrs.values()):
            builder.resolve(desc)


__all__ = ["build_sub_blocks"]
