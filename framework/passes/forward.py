"""The forward-mode pass: ``forward_gradients`` pushes tangents from inputs to targets as more program.

Reverse mode (``backward.py``) appends, after the forward part, the ops that pull
one output's gradient back to every input. Forward mode pushes one direction in
input space (a tangent per input) forward to every output: right after each op
whose inputs carry tangents, it inserts the ops that compute its outputs'
tangents (the op's tangent rule, ``grad_makers.tangents.TANGENT_RULES``), so a
tangent lives no longer than the values it is computed from. One walk in program
order, a dict from var name to the name of its current tangent, nothing else:

1. seed each input's tangent (the given var, or ones made by ``fill_any_like`` just
   before the first op that reads it), after the last op that writes the input;
2. for each op up to the last one writing a target, of those the targets depend on
   (``prune.needed_ops``: a second call pushes nothing through the first one's tangent
   ops): if an input has a tangent, call
   the op's tangent rule with a fresh ``Builder``, insert the ops it records right
   after the op (role ``forward_grad``, ``forward_op`` = the op), and map each output
   to its tangent; an output without one (a symbolic zero) is dropped from the map;
3. ``cond`` and ``while`` rules ask for tangent sub-blocks (``tangent_block``): a copy
   of the forward block with this same walk run inside it.

Tangent ops are ordinary ops: printed, saved, run, and differentiated again
(forward-over-reverse Hessian-vector products are ``forward_gradients`` of the
gradients that ``gradients`` made).
"""
from __future__ import annotations

from typing import Sequence

from gradgen.grad_makers import NON_DIFFERENTIABLE, Builder, RuleError
from gradgen.grad_makers.tangents import TANGENT_RULES
from gradgen.program.dtypes import is_float
from gradgen.program.errors import GradgenError
from gradgen.program.shapes import shapes_agree
from gradgen.program.subblocks import copy_ops, copy_vars, prune_unused
from gradgen.program.variable import Variable

from ..errors import ForwardError
from .backward import gradients
from .backward_context import NameAllocator
from .prune import needed_ops
from .forward_context import RuleContext

TANGENT_SUFFIX = "@TANGENT"
ROLE = "forward_grad"
_ONES = object()  # a default seed not made yet: ones, filled just before the first read


class ForwardPass:
    """The state of one forward-mode pass: the name allocator it shares with the walks of its sub-blocks."""

    def __init__(self, program):
        self.program = program
        self.names = NameAllocator(program.global_block())

    # -- one block -------------------------------------------------------------
    def walk(self, block, seeds: dict[int, list[tuple[str, object]]], end: int, origin: list | None = None,
             needed: set[int] | None = None) -> dict[str, str]:
        """Push tangents through ops ``[0, end)`` of ``block``, inserting tangent ops; the tangents at the end.

        ``seeds[k]`` are ``(var, tangent)`` pairs that take effect after op ``k``
        (``-1``: before the first op); a tangent of ``_ONES`` is made on first read.
        ``origin[k]``, when given, is the op that op ``k`` copies (the tangent ops' ``forward_op``).
        ``needed``, when given, holds the ops whose outputs the wanted tangents depend on: the others get no
        tangent ops (their outputs lose their tangents), so a pass adds only what its targets need.
        """
        tangents: dict[str, object] = dict(seeds.get(-1, ()))
        original = list(block.ops[:end])
        offset = 0
        for k, op in enumerate(original):
            at = k + offset
            source = origin[k] if origin is not None else op
            wanted = needed is None or k in needed
            reads = [n for n in op.input_arg_names if n in tangents] if wanted else []
            for n in reads:
                if tangents[n] is _ONES:
                    tangents[n] = self.ones(block, at, n, source)
                    at += 1
            outs = op.output_arg_names
            made: dict[str, str] = {}
            if reads and op.type not in NON_DIFFERENTIABLE:
                descs, made = self.apply_rule(op, source, k, tangents)
                for j, desc in enumerate(descs):
                    block.insert_op(at + 1 + j, desc.type, desc.inputs, desc.outputs, desc.attrs, role=ROLE,
                                    forward_op=source, callsite=op.callsite)
                at += len(descs)
            for n in outs:
                tangents.pop(n, None)
            tangents.update(made)
            tangents.update(seeds.get(k, ()))
            offset = at - k
        return tangents  # type: ignore[return-value]

    def ones(self, block, at: int, name: str, op) -> str:
        """A tangent of ones for ``name``, made by an op inserted at ``at``."""
        tangent = self.names.fresh(name + TANGENT_SUFFIX)
        block.insert_op(at, "fill_any_like", {"X": [name]}, {"Out": [tangent]}, {"value": 1.0}, role=ROLE,
                        forward_op=op, callsite=op.callsite if op is not None else "forward_gradients")
        return tangent

    def apply_rule(self, op, source, k: int, tangents: dict) -> tuple[list, dict[str, str]]:
        """The op descriptions of ``op``'s tangent rule and the tangent name of each output that has one.

        Errors name ``source``, the op ``op`` is (or copies, in a tangent sub-block), by its place ``k``
        in its block before the pass: the user's op where the user put it.
        """
        rule = TANGENT_RULES.get(op.type)
        where = f"block {source.block.idx}, op #{k} ({op.type})"
        if rule is None:
            moving = [n for n in op.input_arg_names if n in tangents]
            raise ForwardError(f"{where} has no tangent rule, but tangents reach it through "
                               f"{', '.join(repr(n) for n in moving)}; give it one beside its grad maker "
                               "(grad_makers/<family>.py; a user op: register_op(tangent=...)), or "
                               "leave those vars out of the inputs")
        g = Builder(rule.allowed)
        label = (op.output_arg_names or [op.type])[0]
        try:
            result = rule(g, RuleContext(self, op, tangents))
            pairs, made = self.results(op, result)
            descs = g.finish(pairs, lambda prefix: self.names.fresh(f"{label}{TANGENT_SUFFIX}@{prefix}"))
        except RuleError as e:
            raise ForwardError(f"{where}, tangent rule {getattr(rule, '__name__', rule)!r}: {e}") from None
        return descs, made

    def results(self, op, result: dict) -> tuple[list[tuple[str, object]], dict[str, str]]:
        """``(tangent name, value)`` for each float output given a recorded value; an existing var is aliased."""
        pairs, made = [], {}
        for slot, values in result.items():
            names = op.outputs.get(slot)
            if names is None:
                raise RuleError(f"the rule returns a tangent for output slot '{slot}', which the op does not have")
            values = values if isinstance(values, list) else [values]
            if len(values) != len(names):
                raise RuleError(f"the rule returns {len(values)} tangent(s) for output slot '{slot}', which holds "
                                f"{len(names)} var(s)")
            for name, value in zip(names, values):
                if value is None or not is_float(op.block.var(name).dtype):
                    continue
                if isinstance(value, str):
                    made[name] = value
                else:
                    made[name] = self.names.fresh(name + TANGENT_SUFFIX)
                    pairs.append((made[name], value))
        return pairs, made

    # -- sub-blocks of control-flow ops -----------------------------------------
    def tangent_block(self, op, source: int, results: Sequence[str], seeds: Sequence[tuple[str, str]],
                      carried: Sequence[str], keep: Sequence[str]) -> tuple[int, list[str], list[str]]:
        """A new sub-block (under ``op``'s block) that re-runs block ``source`` and pushes tangents through it.

        Outer vars get the tangents ``seeds``; each var of ``carried`` (parameters
        of ``source``) gets a new parameter as its tangent. Returns the new block's
        index, those parameters, and the tangent of each of ``results`` (zeros
        where none), local to the block. Ops neither those tangents nor ``keep``
        need are pruned.
        """
        src = self.program.block(source)
        block = self.program.create_block(op.block.idx)
        copy_vars(src, block)
        params = []
        for name in carried:
            var = src.var(name)
            params.append(self.names.fresh(name + TANGENT_SUFFIX))
            block.create_var(params[-1], var.shape, var.dtype)
        copy_ops(src, block)
        written = {n for o in block.ops for n in o.output_arg_names}
        bound = [n for n in block.vars if n not in written]  # the block's parameters and its other inputs
        tangents = self.walk(block, {-1: list(seeds) + list(zip(carried, params))}, len(block.ops), list(src.ops))
        outs = []
        for name in results:
            t = tangents.get(name)
            if t is None or t not in block.vars:
                out = self.names.fresh(name + TANGENT_SUFFIX)
                fill = ("fill_zeros_like", name) if t is None else ("assign", t)
                block.append_op(fill[0], {"X": [fill[1]]}, {"Out": [out]}, role=ROLE, forward_op=op,
                                callsite=op.callsite)
                t = out
            outs.append(t)
        prune_unused(block, list(keep) + outs, bound)
        return block.idx, params, outs

    def transposed_block(self, op, source: int, results: Sequence[str], directions: Sequence[str | None],
                         wrt: Sequence[str]) -> tuple[int, list[str]]:
        """A copy of block ``source`` (under ``op``'s block) ending in the gradient, with respect to its vars
        ``wrt``, of ``s = sum_k <results[k], directions[k]>`` (an empty result or a None direction adds
        nothing); zeros where ``s`` does not depend on a var. If the block is linear in ``wrt``, that gradient
        is the block's transpose applied to the directions. Returns the block's index and the gradients."""
        block = self.program.create_block(op.block.idx)
        src = self.program.block(source)
        copy_vars(src, block)
        copy_ops(src, block)
        written = {n for o in block.ops for n in o.output_arg_names}
        bound = [n for n in block.vars if n not in written]

        def emit(type_: str, inputs: dict, attrs: dict | None = None) -> str:
            out = self.names.fresh(f"{op.output_arg_names[0]}{TANGENT_SUFFIX}@{type_.removeprefix('elementwise_')}")
            block.append_op(type_, inputs, {"Out": [out]}, attrs, role=ROLE, forward_op=op, callsite=op.callsite)
            return out

        terms = [emit("reduce_sum", {"X": [emit("elementwise_mul", {"X": [r], "Y": [d]})]}, {"reduce_all": True})
                 for r, d in zip(results, directions) if r and d is not None]
        total = terms[0] if len(terms) == 1 else emit("sum", {"X": terms}) if terms else None
        grads = gradients([block.var(total)], [block.var(w) for w in wrt]) if total else [None] * len(wrt)
        outs = [g.name if g is not None else emit("fill_zeros_like", {"X": [w]}) for w, g in zip(wrt, grads)]
        prune_unused(block, outs, bound)
        return block.idx, outs


def _as_list(values) -> list:
    return [values] if isinstance(values, Variable) else list(values)


def _check_made_in_time(block, k: int, x: str, t: str, x_made: int, end: int) -> None:
    """A ForwardError when input tangent ``t`` is made after an op that reads input ``x``: the tangent ops go
    right after each op they follow, where ``t`` does not exist yet."""
    made = max((i for i, op in enumerate(block.ops) if t in op.output_arg_names), default=-1)
    reader = next((i for i in range(x_made + 1, end) if x in block.ops[i].input_arg_names), None)
    if reader is not None and made >= reader:
        op = block.ops[made]
        raise ForwardError(f"input_tangents[{k}] '{t}' is made by op #{made} ({op.type}), after op #{reader} "
                           f"({block.ops[reader].type}) reads input '{x}': make the tangent before the ops it moves")


def _check(targets: list[Variable], inputs: list[Variable], input_tangents: list) -> None:
    if not targets:
        raise ForwardError("forward_gradients needs at least one target")
    block = targets[0].block
    for what, items in (("targets", targets), ("inputs", inputs)):
        for k, v in enumerate(items):
            if not isinstance(v, Variable) or v.block.program is not block.program:
                raise ForwardError(f"{what}[{k}] {v!r} is not a var of the targets' program")
            if v.block is not block:
                raise ForwardError(f"{what}[{k}] '{v.name}' is in block {v.block.idx}, the targets in block "
                                   f"{block.idx}")
            if not is_float(v.dtype):
                raise ForwardError(f"{what}[{k}] '{v.name}' is {v.type_str()}: only floating-point vars have tangents")
    if len(input_tangents) != len(inputs):
        raise ForwardError(f"{len(input_tangents)} input_tangents for {len(inputs)} inputs")
    for k, (x, t) in enumerate(zip(inputs, input_tangents)):
        if t is not None and (not isinstance(t, Variable) or t.block.program is not block.program
                              or not shapes_agree(t.shape, x.shape) or t.dtype != x.dtype):
            shown = t.type_str() if isinstance(t, Variable) else repr(t)
            raise ForwardError(f"input_tangents[{k}] {getattr(t, 'name', '')!r} is {shown} but input '{x.name}' is "
                               f"{x.type_str()}; a tangent is a var of the same program, shape and dtype")


def forward_gradients(targets, inputs, input_tangents=None) -> list[Variable | None]:
    """Insert forward-mode ops computing the directional derivative of each target; return the tangent vars.

    For inputs ``x_i`` moving in directions ``v_i`` (``input_tangents``, vars of
    the inputs' shapes; default ones), the tangent of target ``y`` is
    ``sum_i dy/dx_i . v_i``, the Jacobian-vector product. None where a target
    does not depend on the inputs. Each op's tangent ops are inserted right after it.

    >>> (dy,) = forward_gradients(y, [x], [v])   # dy = J v, one pass for any number of outputs
    """
    targets, inputs = _as_list(targets), _as_list(inputs)
    if input_tangents is None:
        input_tangents = [None] * len(inputs)
    input_tangents = _as_list(input_tangents)
    _check(targets, inputs, input_tangents)
    block = targets[0].block
    wanted = {t.name for t in targets}
    end = 1 + max((i for i, op in enumerate(block.ops) if wanted & set(op.output_arg_names)), default=-1)
    last_write = {}
    for i, op in enumerate(block.ops[:end]):
        for n in op.output_arg_names:
            last_write[n] = i
    seeds: dict[int, list[tuple[str, object]]] = {}
    for k, (x, t) in enumerate(zip(inputs, input_tangents)):
        seeds.setdefault(last_write.get(x.name, -1), []).append((x.name, _ONES if t is None else t.name))
        if t is not None:
            _check_made_in_time(block, k, x.name, t.name, last_write.get(x.name, -1), end)
    forward_pass = ForwardPass(block.program)
    before = _Snapshot(block.program)
    try:
        # Only the ops the targets depend on get tangent ops: not a forward op the targets do not read, nor the
        # tangent ops an earlier call made (a second call used to push tangents through those too).
        tangents = forward_pass.walk(block, seeds, end, needed=set(needed_ops(block, wanted)))
        found = []
        for t in targets:
            tangent = tangents.get(t.name)
            if tangent is _ONES:
                tangent = forward_pass.ones(block, len(block.ops), t.name, None)
            found.append(block.var(tangent) if tangent is not None else None)
    except GradgenError:
        before.restore()  # a failed pass leaves the program as it found it
        raise
    return found


class _Snapshot:
    """Which ops, vars and blocks a program has, so a failed pass can take out what it added."""

    def __init__(self, program):
        self.program = program
        self.blocks = len(program.blocks)
        self.ops = [{id(op) for op in b.ops} for b in program.blocks]
        self.vars = [set(b.vars) for b in program.blocks]

    def restore(self) -> None:
        for block, ops, names in zip(self.program.blocks, self.ops, self.vars):
            block.remove_ops([i for i, op in enumerate(block.ops) if id(op) not in ops])
            for name in [n for n in block.vars if n not in names]:
                block.remove_var(name)
        if len(self.program.blocks) > self.blocks:
            self.program.remove_blocks(range(self.blocks, len(self.program.blocks)))


__all__ = ["forward_gradients", "ForwardPass", "TANGENT_SUFFIX"]
