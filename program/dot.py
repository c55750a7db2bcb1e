"""The dataflow of a whole program as a Graphviz picture, built with the ``graphviz`` package (extra ``[dot]``).

Ops are boxes filled by role, vars are ellipses (parameters bold). The last
grad op made for a forward op sits on that op's rank, so the backward part
mirrors the forward part beside it instead of continuing below it (pinning
every grad op there laid a loss's long chain of grad ops out in one row). An
optimizer's new value of a persistable var is its own node next to the
update (``w (updated)``), so write-backs draw no edge back up the picture;
its state (moments, learning rate) is counted in its label, not drawn.
Sub-blocks are clusters inside the one picture, joined to the op that owns
them by a dashed edge. A legend explains the colours.
"""
from __future__ import annotations

import re

from .errors import ProgramError
from .provenance import op_provenance, producers
from .subblocks import owned_blocks

ROLE_COLOURS = {"forward": "#cfe2ff", "backward": "#f8d7da", "optimize": "#d1e7dd", "forward_grad": "#fff3cd"}
"""Op node fill colour by role: blue forward, red backward, green optimize."""


def _digraph_class():
    try:
        import graphviz  # an optional dependency: only pictures need it
    except ImportError:
        raise ProgramError("drawing a program needs the graphviz package: pip install 'gradgen[dot]'") from None
    return graphviz.Digraph


def _legend(graph) -> None:
    with graph.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", fontsize="10", style="rounded", color="#999999")
        for role, colour in ROLE_COLOURS.items():
            legend.node(f"legend_{role}", f"{role} op", shape="box", style="filled", fillcolor=colour)
        legend.node("legend_var", "var\ntype", shape="ellipse")
        legend.node("legend_param", "parameter", shape="ellipse", style="bold")
        legend.node("legend_new", "value an update\nwrites back", shape="ellipse", style="dashed")
        legend.edge("legend_forward", "legend_backward", label="same rank:\ngrad of", style="invis")


def _drawn_slots(op) -> tuple[list[str], list[str], list[str]]:
    """The inputs and outputs drawn as nodes, and the optimizer state folded into the op's label.

    An optimizer op draws only the parameter, its gradient and the updated value: its moments,
    powers and learning rate are read and written back in place and would fan out across the picture.
    """
    if op.role != "optimize" or not op.input("Param"):
        return op.input_arg_names, op.output_arg_names, []
    ins = op.input("Param") + op.input("Grad")
    outs = op.output("ParamOut")
    state = [n for n in dict.fromkeys(op.input_arg_names + op.output_arg_names) if n not in ins + outs]
    return ins, outs, state


def _block_results(op) -> list[str]:
    """The sub-block vars a control-flow op takes as results (its ``*_out`` / ``*_outs`` attrs): read too."""
    names = []
    for key, value in op.attrs.items():
        if key.endswith(("_out", "_outs")):
            names += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
    return names


_FINAL_GRADIENT = re.compile(r".+@GRAD(@\d+)?")
"""How the backward pass names a finished gradient: ``x@GRAD`` (``x@GRAD@1`` when taken again); partial
sums (``@RENAME@k``), zero fills and loop histories have longer names."""


def _kept(block, name: str) -> bool:
    """Drawn even when no op reads it: persistable vars and the gradients the program was built to compute
    (``gradients(loss, [x])`` returns ``x@GRAD``, which only a fetch reads)."""
    var = block.find_var(name)
    return (var is not None and var.persistable) or _FINAL_GRADIENT.fullmatch(name) is not None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _draw_block(program, block, graph, positions, read: set[str]) -> str | None:
    """Nodes and edges of ``block`` into ``graph``; returns the id of its first op node (None if it has no ops).

    Outputs no op of the program reads (a loop's unused history, say) are counted in the op's label,
    unless they are gradients the program computes (see ``_kept``).
    """
    b = block.idx
    made_by = producers(block)
    declared: dict[tuple[str, bool], str] = {}  # node ids are plain counters: a ':' in an id would name a port

    def var_node(name: str, updated: bool = False) -> str:
        node = declared.get((name, updated))
        if node is None:
            node = declared[(name, updated)] = f"b{b}_v{len(declared)}"
            var = block.find_var(name)
            label = f"{name}\n{var.type_str()}" if var is not None else name
            style = "dashed" if updated else ("bold" if var is not None and var.is_parameter else "solid")
            graph.node(node, label + ("\n(updated)" if updated else ""), shape="ellipse", style=style, fontsize="9")
        return node

    mirrors: dict[str, str] = {}  # forward op node -> the last grad op node made for it
    for i, op in enumerate(block.ops):
        node = f"b{b}_op{i}"
        ins, outs, state = _drawn_slots(op)
        hidden = [n for n in outs if n not in read and not _kept(block, n)]
        outs = [n for n in outs if n not in hidden]
        label = f"#{i} {op.type}"
        if state:
            label += f"\n(+ {_count(len(state), 'state var')})"
        if hidden:
            label += f"\n(+ {_count(len(hidden), 'output')} nothing reads)"
        graph.node(node, label, shape="box", style="filled", fillcolor=ROLE_COLOURS.get(op.role, "#fff"))
        origin = op_provenance(op, i, positions, made_by)
        if origin.kind == "grad" and origin.refs and origin.refs[0][0] == b:
            mirrors[f"b{b}_op{origin.refs[0][1]}"] = node
        for name in ins:
            graph.edge(var_node(name), node)
        for name in outs:
            var = block.find_var(name)
            updated = op.role == "optimize" and var is not None and var.persistable
            graph.edge(node, var_node(name, updated))
        for sub in owned_blocks(op):
            if 0 <= sub < len(program.blocks) and sub != b:
                with graph.subgraph(name=f"cluster_b{sub}") as cluster:
                    cluster.attr(label=f"block {sub} (of #{i} {op.type} in block {b})", style="rounded",
                                 color="#888888", fontsize="10")
                    first = _draw_block(program, program.blocks[sub], cluster, positions, read)
                if first is not None:
                    graph.edge(node, first, style="dashed", color="#888888", lhead=f"cluster_b{sub}",
                               constraint="false")
    for fwd, grad in mirrors.items():
        with graph.subgraph() as same:
            same.attr(rank="same")
            same.node(fwd)
            same.node(grad)
    return f"b{b}_op0" if block.ops else None


RANK_DIRECTIONS = ("TB", "LR")
"""Top to bottom (the default) or left to right: a long, narrow program reads better across."""


def program_to_dot(program, block_idx: int = 0, rankdir: str = "TB") -> str:
    """The DOT source of block ``block_idx`` with its sub-blocks as clusters; render it with ``dot -Tsvg``.

    ``rankdir`` is one of ``RANK_DIRECTIONS``; a big program's sub-blocks can be drawn on their own by
    passing their index as ``block_idx``."""
    if rankdir not in RANK_DIRECTIONS:
        raise ProgramError(f"dot: rankdir must be one of {', '.join(RANK_DIRECTIONS)}, got {rankdir!r}")
    block = program.block(block_idx)
    graph = _digraph_class()(f"block_{block.idx}")
    graph.attr(rankdir=rankdir, compound="true", newrank="true", fontname="Helvetica")
    graph.attr("node", fontname="Helvetica", fontsize="10")
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    _legend(graph)
    read = {n for b in program.blocks for op in b.ops for n in op.input_arg_names}
    read |= {n for b in program.blocks for op in b.ops for n in _block_results(op)}
    _draw_block(program, block, graph, positions, read)
    return graph.source


__all__ = ["RANK_DIRECTIONS", "ROLE_COLOURS", "program_to_dot"]
