"""``custom_gradient``: a function whose gradient is the user's own, both built as ordinary ops in sub-blocks.

    clipped = layers.custom_gradient(lambda x: x, lambda ins, outs, douts: layers.clip(douts[0], -1.0, 1.0),
                                     name="clip_grad_to_1")
    y = clipped(h)

The forward function runs once, at build time, on parameter vars shaped like
the inputs, inside a fresh sub-block; the gradient function likewise, on
parameter vars for the inputs, the outputs and the outputs' gradients, and
returns one gradient per input (None: no gradient). One ``custom_gradient``
op owns both blocks: it runs the forward body, and its grad maker runs the
gradient body (so ``print(program)`` shows both, and second order works where
the gradient body is differentiable). A gradient of the wrong shape or dtype
is an error when the op is built, naming the rule.
"""
from __future__ import annotations

from typing import Callable

from ..errors import ProgramError
from ..guard import default_main_program
from ..subblocks import building_block, check_writes_local, external_reads
from ..variable import Variable
from .control_flow import _as_results, _fresh
from .helper import own_var


def _params(program, block, rule: str, like: list[Variable], suffix: str = "") -> list[Variable]:
    return [block.create_var(_fresh(program, f"{rule}.{v.name}{suffix}"), v.shape, v.dtype) for v in like]


def _local(program, block, results: list, rule: str) -> list[str]:
    """Result names, each a var of ``block`` made by an op there (an input or outer var is copied by ``assign``)."""
    made = {n for op in block.ops for n in op.output_arg_names}
    names = []
    for v in results:
        if v is None:
            names.append("")
            continue
        if v.name not in made:
            copy = _fresh(program, f"{v.name}.copy")
            block.append_op("assign", {"X": [v.name]}, {"Out": [copy]})
            names.append(copy)
        else:
            names.append(v.name)
    return names


def custom_gradient(forward_fn: Callable[..., object] | None = None,
                    grad_fn: Callable[[tuple, tuple, tuple], object] | None = None,
                    name: str | None = None) -> Callable[..., object]:
    """A function of vars computed by ``forward_fn`` whose gradient is ``grad_fn(inputs, outputs, output_grads)``.

    ``grad_fn`` gets three tuples of vars and returns a var (one input) or a
    list with one var or None per input; it must be linear in the output
    gradients (a vector-Jacobian product). Returns the function to call on
    vars; each call builds one ``custom_gradient`` op and returns its output
    (or a tuple of them). Forward mode follows the same rule (its transpose).
    Without ``forward_fn`` it is a decorator: ``@custom_gradient(grad_fn=...)``.
    """
    if grad_fn is None:
        raise ProgramError("custom_gradient needs grad_fn, the gradient rule")
    if forward_fn is None:
        return lambda fn: custom_gradient(fn, grad_fn, name)
    rule = name or getattr(forward_fn, "__name__", "custom")
    if rule == "<lambda>":
        rule = "custom"

    def apply(*xs: Variable):
        xs = tuple(own_var(x, f"custom gradient '{rule}' input {k}") for k, x in enumerate(xs))
        program = default_main_program()
        parent = program.current_block()
        body = program.create_block(parent.idx)
        ins = _params(program, body, rule, list(xs))
        with building_block(program, body):
            outs = _as_results(forward_fn(*ins), f"custom gradient '{rule}' forward_fn")
            out_names = _local(program, body, outs, rule)
        check_writes_local(body, f"custom gradient '{rule}' forward_fn")
        grad = program.create_block(parent.idx)
        g_ins = _params(program, grad, rule, list(xs))
        g_outs = _params(program, grad, rule, outs)
        g_douts = _params(program, grad, rule, outs, "@GRAD")
        with building_block(program, grad):
            grads = grad_fn(tuple(g_ins), tuple(g_outs), tuple(g_douts))
            grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
            checked = [None if v is None else own_var(v, f"custom gradient '{rule}' gradient {k}")
                       for k, v in enumerate(grads)]
            grad_names = _local(program, grad, checked, rule)
        check_writes_local(grad, f"custom gradient '{rule}' grad_fn")
        base = program.unique_name(rule)
        results = [base] if len(out_names) == 1 else [f"{base}.{k}" for k in range(len(out_names))]
        parent.append_op("custom_gradient", {"X": [x.name for x in xs], "Input": external_reads([body, grad])},
                         {"Out": results},
                         {"rule": rule, "forward_block": body.idx, "forward_params": [v.name for v in ins],
                          "forward_outs": out_names, "grad_block": grad.idx,
                          "grad_params": [v.name for v in g_ins + g_outs + g_douts], "grad_outs": grad_names})
        made = tuple(parent.var(n) for n in results)
        return made[0] if len(made) == 1 else made

    apply.__name__ = rule
    return apply


__all__ = ["custom_gradient"]
