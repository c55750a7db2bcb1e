"""Graphviz DOT text of one block: vars and ops as nodes, coloured by role, gradients linked to their vars."""
from __future__ import annotations

ROLE_COLOURS = {"forward": "#cfe2ff", "backward": "#f8d7da", "optimize": "#d1e7dd", "forward_grad": "#fff3cd"}
"""Op node fill colour by role: blue forward, red backward, green optimize."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def program_to_dot(program, block_idx: int = 0) -> str:
    """The DOT source of ``program.block(block_idx)``; render it with ``dot -Tsvg``.

    Ops are boxes filled by role, vars are ellipses (parameters bold), and a
    dashed edge joins each gradient var ``x@GRAD...`` to the var ``x`` it is
    the gradient of.
    """
    block = program.block(block_idx)
    lines = [f"digraph block_{block.idx} {{", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    names: list[str] = []
    seen = set()
    for op in block.ops:
        for n in op.input_arg_names + op.output_arg_names:
            if n not in seen:
                seen.add(n)
                names.append(n)
    for n in names:
        var = block.find_var(n)
        label = f"{n}\\n{var.type_str()}" if var is not None else n
        style = ', style="bold"' if var is not None and var.is_parameter else ""
        lines.append(f"  {_quote('var:' + n)} [shape=ellipse, label={_quote(label)}{style}];")
    for i, op in enumerate(block.ops):
        node = _quote(f"op:{i}")
        colour = ROLE_COLOURS.get(op.role, "#ffffff")
        lines.append(f'  {node} [shape=box, style="filled", fillcolor="{colour}", label={_quote(f"#{i} {op.type}")}];')
        for n in op.input_arg_names:
            lines.append(f"  {_quote('var:' + n)} -> {node};")
        for n in op.output_arg_names:
            lines.append(f"  {node} -> {_quote('var:' + n)};")
    for n in names:
        if "@GRAD" in n:
            base = n.split("@GRAD")[0]
            if base in seen:
                lines.append(f'  {_quote("var:" + base)} -> {_quote("var:" + n)} [style=dashed, color="#888888", '
                             f"arrowhead=none, constraint=false];")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["ROLE_COLOURS", "program_to_dot"]
