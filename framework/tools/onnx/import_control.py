"""ONNX importers of If and Loop nodes, and of the If that gradgen's reduce_as exports as (see ``import_table``)."""
from __future__ import annotations

from gradgen.program import layers

from .errors import NotImportable
from .import_checks import tensor_value


def _only_node(graph, op_type: str):
    """The one non-Constant node of a branch when it is an ``op_type``, else None."""
    nodes = [n for n in graph.node if n.op_type != "Constant"]
    return nodes[0] if len(nodes) == 1 and nodes[0].op_type == op_type else None


def reduce_as_if(ctx, target: str, axis: int) -> None:
    """``If(dim axis of target == 1, ReduceSum(x, [axis], keepdims=1), x)``, which the export makes of a reduce_as
    whose target has an unknown dim, back to ``reduce_as(x, target)`` (it sums exactly the dims target has as 1)."""
    summed, kept = _only_node(ctx.subgraph("then_branch"), "ReduceSum"), _only_node(ctx.subgraph("else_branch"),
                                                                                    "Identity")
    if summed is None or kept is None or summed.input[0] != kept.input[0] or len(summed.input) < 2:
        raise NotImportable("an If on a run-time dim other than the one a reduce_as exports as")
    consts = {c.output[0]: tensor_value(c.attribute[0].t, f"Constant '{c.output[0]}'")
              for c in ctx.subgraph("then_branch").node if c.op_type == "Constant"}
    axes = consts.get(summed.input[1], ctx.graph.lookup_const(summed.input[1]))
    keep = next((a.i for a in summed.attribute if a.name == "keepdims"), 1)
    if axes is None or axes.reshape(-1).tolist() != [axis] or keep != 1:
        raise NotImportable("an If on a run-time dim other than the one a reduce_as exports as")
    x = ctx.graph.lookup_var(summed.input[0])
    if x is None:
        raise NotImportable(f"input '{summed.input[0]}' is not defined")
    ctx.out("reduce_as", {"X": x, "Target": target})


def if_(ctx):
    unit = ctx.graph.lookup_symbol("unit_dims", ctx.node.input[0])
    if unit is not None:
        return reduce_as_if(ctx, *unit)
    pred = ctx.importer.block().var(ctx.x(0))
    then_g, else_g = ctx.subgraph("then_branch"), ctx.subgraph("else_branch")
    outs = layers.cond(pred, lambda: _vars(ctx, ctx.import_subgraph(then_g, {})),
                       lambda: _vars(ctx, ctx.import_subgraph(else_g, {})))
    outs = outs if isinstance(outs, tuple) else (outs,)
    for k, v in enumerate(outs):
        _bind_named(ctx, k, v.name)


def _bind_named(ctx, k: int, var: str) -> None:
    """Bind output k to ``var``, a result of cond or while (which name their results themselves): through an
    assign named after the ONNX output when the names differ, so a model's outputs keep their names (gradgen's
    export names them after the vars they were: a round trip gives back ``loss``, not ``cond_0``)."""
    if var == ctx.node.output[k]:
        return ctx.bind(k, var)
    ctx.out("assign", {"X": var}, k=k)


def _vars(ctx, names):
    block = ctx.importer.block()
    return [block.var(n) for n in names]


def loop(ctx):
    """Loop(M, cond, v...) as while over (i, cond, v...): the body's scan outputs must be its loop inputs as they
    came in (gradgen's History); the trip count M bounds the loop through the condition, and the import's
    ``max_loop_iterations`` bounds every run (more steps are a run-time error)."""
    body = ctx.subgraph("body")
    n = ctx.n_inputs - 2
    n_scan = len(body.output) - 1 - n
    body_inputs = [i.name for i in body.input]
    if len(body_inputs) != 2 + n or n_scan < 0 or len(ctx.node.output) != n + n_scan:
        raise NotImportable(f"{n} loop-carried values need a body of {2 + n} inputs and at least {1 + n} outputs, "
                            f"and the node {n} outputs plus one per scan output; the body has {len(body_inputs)} "
                            f"inputs and {len(body.output)} outputs, the node {len(ctx.node.output)} outputs")
    scan_of = []
    for out in body.output[1 + n:]:
        producer = next((nd for nd in body.node if out.name in nd.output), None)
        source = producer.input[0] if producer is not None and producer.op_type == "Identity" else out.name
        if source not in body_inputs[2:]:
            raise NotImportable("a scan output that is not a loop-carried input (gradgen records only those)")
        scan_of.append(body_inputs.index(source) - 2)
    block = ctx.importer.block()
    zero = block.var(ctx.tmp("fill_constant", {}, {"shape": [], "dtype": "int64", "value": 0.0}))
    if ctx.has(1):
        go = block.var(ctx.x(1))
    else:
        go = block.var(ctx.tmp("fill_constant", {}, {"shape": [], "dtype": "bool", "value": 1.0}))
    limit = block.var(ctx.x(0)) if ctx.has(0) else None
    if go.shape != ():
        go = layers.reshape(go, [])
    values = [block.var(ctx.x(2 + k)) for k in range(n)]

    def keep_going(i, c, *vs):
        if limit is None:
            return c
        below = layers.cast(layers.less_than(i, layers.reshape(limit, [])), "int64")
        both = layers.multiply(below, layers.cast(c, "int64"))
        return layers.greater_than(both, layers.fill_constant([], "int64", 0))

    def step(i, c, *vs):
        outs = _vars(ctx, ctx.import_subgraph(body, dict(zip(body_inputs, [i.name, c.name] + [v.name for v in vs]))))
        again = outs[0] if outs[0].shape == () else layers.reshape(outs[0], [])
        return [i + layers.fill_constant([], "int64", 1), again] + outs[1: 1 + n]

    # The trip count is often INT64_MAX, a bound on a loop its condition ends: the run is capped instead.
    finals = layers.while_loop(keep_going, step, [zero, go] + values,
                               max_iterations=ctx.importer.limits.max_loop_iterations)
    history = block.ops[-1].output("History")
    for k in range(n):
        _bind_named(ctx, k, finals[2 + k].name)
    for j, k in enumerate(scan_of):
        _bind_named(ctx, n + j, history[2 + k])
