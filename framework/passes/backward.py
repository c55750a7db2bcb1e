"""The backward pass: ``append_backward`` and ``gradients``.

The pass appends the gradient of a program as more program:

1. seed the targets' gradients (ones shaped like each target, or the given ``target_gradients``);
2. find the ops on a path from the inputs to the targets (networkx reachability on the
   versioned dataflow graph, built once);
3. walk those ops in reverse; each op's grad maker (``grad_makers.GRAD_MAKERS``) records the ops of its
   rule with a fresh ``grad_makers.Builder``, which keeps those the wanted gradients need; the gradient
   sub-blocks control-flow makers record are built here (``backward_subblocks``);
4. where a var's gradient has several contributions, name them ``x@GRAD@RENAME@k`` and sum
   them with one ``sum`` op right before the first use of ``x@GRAD``;
5. zero-fill output gradients a maker needs but nothing produced; skip ops none of whose
   outputs has a gradient;
6. append the ops through ``Block.append_op``, which types every new var by schema inference;
7. mark each appended op with role ``backward`` and the forward op it was made for.

Every step is linear in the number of ops: one graph, one reverse walk, one append loop.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE, Builder, OpDesc, RuleError
from gradgen.program.dtypes import is_float
from gradgen.program.graph import dataflow_graph, latest_version, reachable
from gradgen.program.shapes import shapes_agree
from gradgen.program.subblocks import owned_blocks, rename_outer_reads
from gradgen.program.variable import Variable

from .backward_context import MakerContext, NameAllocator
from .backward_subblocks import build_sub_blocks
from .collector import paused
from ..errors import BackwardError
from .recompute import apply_recompute, plan_recompute

GRAD_SUFFIX = "@GRAD"


def _names(vars_: Iterable | None) -> set[str]:
    return {v if isinstance(v, str) else v.name for v in (vars_ or ())}


class _Pass:
    """The state of one backward pass over one block."""

    def __init__(self, block, targets: list[Variable], no_grad: set[str], names: NameAllocator | None = None):
        self.block = block
        self.targets = targets
        self.no_grad = no_grad
        self.names = names if names is not None else NameAllocator(block)
        end = 1 + max((i for i, op in enumerate(block.ops) if set(op.output_arg_names) & {t.name for t in targets}),
                      default=-1)
        self.end = end
        self.graph = dataflow_graph(block, range(end))
        self.contributions: dict[tuple, list[str]] = {}
        self.rename: dict[str, str] = {}
        self.final: dict[tuple, str] = {}
        self.reserved: dict[tuple, str] = {}  # node -> the name its gradient will take (``reserve``)
        self.given: set[str] = set()  # target gradients the caller supplied: existing vars, never renamed
        self.emitted: list[tuple[OpDesc, object]] = []

    # -- which vars carry gradients ------------------------------------------
    def blocked(self, name: str) -> bool:
        var = self.block.find_var(name)
        return var is None or name in self.no_grad or not is_float(var.dtype)

    def differentiable_nodes(self, starts: list[tuple], explicit: set[str]) -> set[tuple]:
        """Var and op nodes on a path from ``starts`` to the targets that crosses no stopped var.

        A var stops gradients when it is in ``no_grad_set``, not floating point,
        or ``stop_gradient`` (unless it is an explicitly requested input).
        """
        graph = self.graph
        names = {n[1] for n in graph if n[0] == "var"}
        stopped = {n for n in names if n not in explicit and (self.blocked(n) or self.block.find_var(n).stop_gradient)}
        stop = {n for n in graph if n[0] == "var" and n[1] in stopped}
        if not starts:  # nothing to start from: no node is on a path
            return set()
        sink, source = ("sink",), ("source",)
        graph.add_edges_from((latest_version(graph, t.name), sink) for t in self.targets)
        graph.add_edges_from((source, s) for s in starts)
        on_path = reachable(graph, sink, reverse=True, stop=stop) & reachable(graph, source, stop=stop)
        graph.remove_nodes_from((sink, source))
        return on_path

    def why_unreached(self, params: list[Variable], reaches_any: bool) -> str:
        """Why no gradient path joins ``params`` to the target: what the target's ancestors hold that stops one.

        ``reaches_any``: whether some other start (a free input var that is not stop_gradient) does reach it.
        """
        target = self.targets[0]
        free = "" if reaches_any else " (nor any var no op writes that is not stop_gradient)"
        if not params:
            reason = (f"the program has no trainable parameters{free}, nothing it could differentiate with respect "
                      f"to (gradients() takes any var)")
        else:
            shown = ", ".join(repr(p.name) for p in params[:5]) + (", ..." if len(params) > 5 else "")
            reason = f"none of its trainable parameters ({shown}){free} reaches it through differentiable ops"
        ancestors = reachable(self.graph, latest_version(self.graph, target.name), reverse=True, stop=set())
        block = self.block
        closed = {n for n in ancestors if n[0] == "op" and block.ops[n[1]].type in NON_DIFFERENTIABLE}
        stops = [f"op #{n[1]} ({block.ops[n[1]].type}) lets no gradient through" for n in sorted(closed)]
        for node in sorted(n for n in ancestors if n[0] == "var" and n[2] > 0):  # values that ops make
            name = node[1]
            if name in self.no_grad:
                stops.append(f"'{name}' is in no_grad_set")
            elif block.var(name).stop_gradient and closed.isdisjoint(self.graph.predecessors(node)):
                stops.append(f"'{name}' is stop_gradient")
        detail = f"; on the way to it, {'; '.join(stops[:5])}" if stops else ""
        return (f"loss '{target.name}' ({target.type_str()}) in block {block.idx} has no gradient to take: "
                f"{reason}{detail}")

    # -- gradient names and accumulation -------------------------------------
    def contribution(self, node: tuple) -> str:
        """A fresh name for one more partial gradient of ``node``."""
        parts = self.contributions.setdefault(node, [])
        name = self.names.fresh(f"{node[1]}{GRAD_SUFFIX}@RENAME@{len(parts)}")
        parts.append(name)
        return name

    def finalize(self, node: tuple, fwd=None) -> str | None:
        """The gradient var of ``node``: its one contribution renamed, or a ``sum`` of several."""
        if node in self.final:
            return self.final[node]
        parts = self.contributions.get(node)
        if not parts:
            return None
        if len(parts) == 1 and parts[0] in self.given:  # a caller's target gradient, and nothing added to it
            self.final[node] = parts[0]
            return parts[0]
        name = self.reserved.pop(node, None) or self.names.fresh(node[1] + GRAD_SUFFIX)
        if len(parts) == 1:
            self.rename[parts[0]] = name
        else:
            self.emitted.append((OpDesc("sum", {"X": list(parts)}, {"Out": [name]}), fwd))
        self.final[node] = name
        return name

    def reserve(self, nodes: list[tuple]) -> None:
        """Claim ``x@GRAD`` for the requested gradients before the walk: a gradient sub-block made on the way (a
        loop's reverse body, reading ``x``) must not take the name, or ``x``'s gradient would be ``x@GRAD@1``."""
        for node in nodes:
            if node not in self.reserved:
                self.reserved[node] = self.names.fresh(node[1] + GRAD_SUFFIX)

    def zeros_like(self, var_name: str, fwd) -> str:
        name = self.names.fresh(var_name + GRAD_SUFFIX + "@ZERO")
        self.emitted.append((OpDesc("fill_zeros_like", {"X": [var_name]}, {"Out": [name]}), fwd))
        return name

    def nested(self, block, targets: list[str], target_grads: list[str], inputs: list[str]) -> list[str | None]:
        """Run a backward pass inside ``block`` (a gradient sub-block) sharing this pass's names."""
        grads = _run_pass([block.var(t) for t in targets], [block.var(n) for n in inputs], True,
                          [block.var(g) for g in target_grads], self.no_grad, self.names)
        return [g.name if g is not None else None for g in grads]

    # -- the walk ------------------------------------------------------------
    def seed(self, target_gradients: Sequence | None) -> None:
        for k, t in enumerate(self.targets):
            node = latest_version(self.graph, t.name)
            given = target_gradients[k] if target_gradients is not None else None
            if given is None:
                name = self.contribution(node)
                self.emitted.append((OpDesc("fill_any_like", {"X": [t.name]}, {"Out": [name]}, {"value": 1.0}), None))
            else:
                if not shapes_agree(given.shape, t.shape) or given.dtype != t.dtype:
                    raise BackwardError(f"target_gradients[{k}] '{given.name}' is {given.type_str()} but target "
                                        f"'{t.name}' is {t.type_str()}")
                # One contribution among others: a later target that depends on this one adds its own.
                self.contributions.setdefault(node, []).append(given.name)
                self.given.add(given.name)

    def walk(self, on_path: set[tuple]) -> None:
        block = self.block
        for i in range(self.end - 1, -1, -1):
            node = ("op", i)
            if node not in on_path:
                continue
            fwd = block.ops[i]
            out_nodes = {n[1]: n for n in self.graph.successors(node)}
            if self.contributions.keys().isdisjoint(out_nodes.values()):
                continue
            if fwd.type in NON_DIFFERENTIABLE:
                continue
            maker = GRAD_MAKERS.get(fwd.type)
            if maker is None:
                wanted = [n for n in fwd.input_arg_names if not self.blocked(n)]
                raise BackwardError(
                    f"block {block.idx}, op #{i} ({fwd.type}) has no grad maker, but the gradient must flow through "
                    f"it to {', '.join(repr(n) for n in wanted) or 'its inputs'}; mark those vars stop_gradient=True "
                    f"or pass them in no_grad_set")
            in_nodes = {n[1]: n for n in self.graph.predecessors(node)}
            ctx = MakerContext(self, fwd, in_nodes, out_nodes, on_path)
            g = Builder(maker.allowed)
            try:
                descs = g.finish(ctx.results(maker(g, ctx)), ctx.tmp)
                if g.blocks:
                    build_sub_blocks(self, ctx, fwd, descs)
            except RuleError as e:
                raise BackwardError(f"block {block.idx}, op #{i} ({fwd.type}), grad maker "
                                    f"{getattr(maker, '__name__', maker)!r}: {e}") from None
            for desc in descs:
                self.emitted.append((desc, fwd))

    def snapshot_overwritten(self) -> None:
        """Give grad ops the values their forward op saw, for vars the forward part overwrites later.

        A grad op reads forward vars by name, but it runs after the whole
        forward part: if a later op writes the same name (``assign(.., output=x)``),
        the name holds the newer value by then. Such a read is redirected to an
        ``assign`` snapshot inserted right where the forward op saw the value.
        (Grad ops owning sub-blocks, which read outer names: cond, while, and the
        ``call`` of a custom gradient, are redirected inside their sub-blocks as well.)
        """
        block = self.block
        writes: dict[str, int] = {}  # name -> index of its last write in the forward part
        seen: set[str] = set()  # names read or written so far
        overwritten: set[str] = set()  # names some op writes after an earlier op read or wrote them
        for j, op in enumerate(block.ops):
            for names in op.inputs.values():
                seen.update(names)
            for names in op.outputs.values():
                for n in names:
                    if n in seen:
                        overwritten.add(n)
                    seen.add(n)
                    writes[n] = j
        if not overwritten:
            return
        position = {id(op): j for j, op in enumerate(block.ops)}
        snapshots: dict[tuple[str, int], str] = {}
        for desc, fwd in self.emitted:
            i = position.get(id(fwd)) if fwd is not None else None
            if i is None:
                continue
            made_here = set(fwd.output_arg_names)
            redirected = {}
            for names in desc.inputs.values():
                for k, n in enumerate(names):
                    if n not in overwritten:
                        continue
                    point = i + 1 if n in made_here else i  # where the value the forward op saw is current
                    if writes.get(n, -1) < point:
                        continue
                    key = (n, point)
                    if key not in snapshots:
                        snapshots[key] = self.names.fresh(f"{n}@SNAPSHOT")
                    names[k] = redirected[n] = snapshots[key]
            if redirected and owned_blocks(desc):  # cond, while, call: its sub-blocks read the outer names too
                rename_outer_reads(block.program, owned_blocks(desc), redirected)
        for (n, point), copy in sorted(snapshots.items(), key=lambda item: -item[0][1]):
            block.insert_op(point, "assign", {"X": [n]}, {"Out": [copy]}, role="backward",
                            callsite="append_backward")

    def materialize(self) -> None:
        """Append every emitted op, renamed, typed by schema inference, marked backward with its forward op."""
        self.snapshot_overwritten()
        block, rename = self.block, self.rename
        for desc, fwd in self.emitted:
            ins, outs = {}, {}
            for slots, renamed in ((desc.inputs, ins), (desc.outputs, outs)):
                for s, ns in slots.items():
                    renamed[s] = list(map(rename.get, ns, ns))  # rename.get(n, n) for each n, without a Python frame
            block.append_op(desc.type, ins, outs, desc.attrs, role="backward", forward_op=fwd,
                            callsite=fwd.callsite if fwd is not None else "append_backward")


def _run(targets: list[Variable], inputs: list[Variable], explicit: bool, target_gradients, no_grad_set):
    # The pass allocates many small objects that all stay alive: the cyclic collector would only rescan them.
    with paused():
        return _run_pass(targets, inputs, explicit, target_gradients, no_grad_set)


def _check_one_program(target: Variable, groups: list[tuple[str, Iterable | None]]) -> None:
    """A BackwardError for a Variable of another program than ``target``'s (never a silent lookup by name)."""
    program = target.block.program
    for what, items in groups:
        for k, v in enumerate(items or ()):
            if isinstance(v, Variable) and v.block.program is not program:
                own = target.block.find_var(v.name)
                here = (f"that program's own '{v.name}' is {own.type_str()}" if own is not None
                        else f"that program has no var named '{v.name}'")
                raise BackwardError(f"{what}[{k}] '{v.name}' ({v.type_str()}) belongs to another program than target "
                                    f"'{target.name}' ({target.type_str()}); {here}. Pass vars of the targets' program")


def _run_pass(targets: list[Variable], inputs: list[Variable], explicit: bool, target_gradients, no_grad_set,
              names: NameAllocator | None = None):
    if not targets:
        raise BackwardError("the backward pass needs at least one target")
    block = targets[0].block
    _check_one_program(targets[0], [("targets", targets), ("inputs", inputs), ("target_gradients", target_gradients),
                                    ("no_grad_set", no_grad_set)])
    for t in targets:
        if t.block is not block:
            raise BackwardError(f"targets '{targets[0].name}' and '{t.name}' are in different blocks")
        if not is_float(t.dtype):
            raise BackwardError(f"target '{t.name}' is {t.type_str()}: only floating-point targets have gradients")
    if target_gradients is not None and len(target_gradients) != len(targets):
        raise BackwardError(f"{len(target_gradients)} target_gradients for {len(targets)} targets")
    p = _Pass(block, targets, _names(no_grad_set), names)
    explicit_names = {v.name for v in inputs} if explicit else set()
    starts = [latest_version(p.graph, v.name) if explicit else ("var", v.name, 0) for v in inputs]
    if not explicit:
        # Every var nothing writes and that is not stop_gradient starts a gradient path too (Paddle's rule).
        starts += [n for n in p.graph if n[0] == "var" and n[2] == 0 and not p.blocked(n[1])
                   and not block.find_var(n[1]).stop_gradient]
    on_path = p.differentiable_nodes(starts, explicit_names)
    if not explicit:
        # An error when nothing reaches the loss, or when there are parameters and none of them does (an
        # optimizer would silently update nothing); a program without parameters may still differentiate
        # with respect to its free input vars (Paddle's rule).
        reaches_any = not on_path.isdisjoint(starts)
        reaches_a_parameter = any(("var", v.name, 0) in on_path for v in inputs)
        if not reaches_any or (inputs and not reaches_a_parameter):
            raise BackwardError(p.why_unreached(inputs, reaches_any))
    nodes = [latest_version(p.graph, v.name) if explicit else ("var", v.name, 0) for v in inputs]
    p.reserve(nodes)
    p.seed(target_gradients)
    p.walk(on_path)
    grads = [p.finalize(node) for node in nodes]
    p.materialize()
    return [block.var(g) if g is not None else None for g in grads]


def append_backward(loss: Variable, parameter_list: Sequence | None = None, no_grad_set: Iterable | None = None,
                    checkpoints: Iterable | None = None) -> list[tuple[Variable, Variable]]:
    """Append the gradient ops of ``loss``; return ``[(param, param@GRAD), ...]``.

    Parameters are the trainable parameters of the program (or ``parameter_list``,
    vars or names) that ``loss`` depends on. With ``checkpoints`` (vars or names),
    only those activations stay alive for the backward part; the forward ops in
    between are run again there (``gradgen.framework.passes.recompute``).

    >>> params_grads = append_backward(loss)
    >>> [(p.name, g.name) for p, g in params_grads]
    [('w1', 'w1@GRAD'), ('w2', 'w2@GRAD')]
    """
    block = loss.block
    if parameter_list is None:
        params = [v for v in block.program.global_block().vars.values() if v.is_parameter and v.trainable]
    else:
        params = [block.var(p) if isinstance(p, str) else p for p in parameter_list]
    _check_one_program(loss, [("parameter_list", params), ("no_grad_set", list(no_grad_set or ()))])
    no_grad = _names(no_grad_set)
    params = [p for p in params if p.name not in no_grad]
    plan = plan_recompute(block, checkpoints) if checkpoints is not None else None
    grads = _run([loss], params, False, None, no_grad)
    if plan is not None:
        apply_recompute(block, plan)
    return [(p, g) for p, g in zip(params, grads) if g is not None]


def gradients(targets, inputs, target_gradients=None, no_grad_set: Iterable | None = None,
              checkpoints: Iterable | None = None) -> list[Variable | None]:
    """Append ops computing d(sum of targets)/d(input) for each input; None where there is no dependence.

    ``inputs`` may be any vars of the targets' block, including stop_gradient
    data vars and vars made by an earlier backward pass (higher-order gradients).
    ``checkpoints`` works as in ``append_backward``.
    """
    targets = [targets] if isinstance(targets, Variable) else list(targets)
    inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    if isinstance(target_gradients, Variable):
        target_gradients = [target_gradients]
    if targets and not inputs:
        raise BackwardError(f"gradients of '{targets[0].name}' with respect to no inputs: pass at least one var")
    plan = plan_recompute(targets[0].block, checkpoints) if checkpoints is not None and targets else None
    grads = _run(targets, inputs, True, target_gradients, no_grad_set)
    if plan is not None:
        apply_recompute(targets[0].block, plan)
    return grads


def seeded_targets(block) -> list[str]:
    """The vars a backward pass of ``block`` was seeded from (a loss), in program order.

    The pass marks them by the op it appends first: a backward-role ``fill_any_like`` of the target that
    was made for no forward op. A target whose gradient the caller gave (``target_gradients``) has none.
    """
    return [op.inputs["X"][0] for op in block.ops
            if op.type == "fill_any_like" and op.role == "backward" and op.forward_op is None]


__all__ = ["append_backward", "gradients", "seeded_targets"]
