"""Adding an op from user code: its schema, kernel, grad maker and tangent rule, in one call.

    softsign = register_op(
        "softsign", inputs=["X"], outputs=["Out"], kernel=lambda x: x / (1.0 + np.abs(x)),
        grad=lambda g, op: {"X": g.div(op.grad("Out"), denominator(g, op.input("X")))},
        tangent=lambda g, op: {"Out": g.div(op.tangent("X"), denominator(g, op.input("X")))},
        emits=("abs", "scale", "square", "elementwise_div"))
    y = softsign(x)                       # a layer function: appends one softsign op

(the complete example, with ``denominator``, is tests/user_ops/softsign_op.py
and design_docs/own_gradients.md).

Registration is explicit: ``register_op`` puts the op into the four tables
gradgen reads (``program.OP_SCHEMAS``, ``grad_makers.GRAD_MAKERS``,
``grad_makers.tangents.TANGENT_RULES``, the runtime's ``KERNELS``), and
nothing else does; importing gradgen registers no user op. A program file
that uses an op the loading process has not registered fails to load with an
error naming the op (the ``gradgen`` command registers the ops of the files
given with ``--ops``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from gradgen.grad_makers import GRAD_MAKERS
from gradgen.grad_makers.base import grad_maker
from gradgen.grad_makers.tangent_rules import tangent_rule
from gradgen.grad_makers.tangents import TANGENT_RULES
from gradgen.program import OP_SCHEMAS
from gradgen.program.errors import GradgenError
from gradgen.program.guard import default_main_program
from gradgen.program.layers.helper import check_var
from gradgen.program.layers.naming import named
from gradgen.program.schema import Attr, schema

from .backend.numpy.kernels import KERNELS

USER_OPS: set[str] = set()
"""Op types added by ``register_op`` in this process."""


class UserOpError(GradgenError):
    """A user-defined op that cannot be registered as given."""


_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))


def _attr(name: str, default: Any) -> Attr:
    """An attr whose kind is read from its default (a list takes its items' kind: ints or floats)."""
    if isinstance(default, (list, tuple)):
        kind = "floats" if any(isinstance(v, float) for v in default) else "ints"
        return Attr(kind, list(default))
    for python_type, kind in _KINDS:
        if isinstance(default, python_type):
            return Attr(kind, default)
    raise UserOpError(f"attr '{name}': default {default!r} is not a bool, int, float, str or list of numbers")


def _factory(kernel: Callable) -> Callable:
    """Today's kernel signature from a plain function of the input arrays (attrs passed by keyword)."""

    def factory(op):
        attrs = dict(op.attrs)
        return (lambda *arrays: kernel(*arrays, **attrs)) if attrs else (lambda *arrays: kernel(*arrays))

    return factory


def register_op(type: str, *, inputs: Sequence[str], outputs: Sequence[str], kernel: Callable,
                infer: Callable | None = None, attrs: Mapping[str, Any] | None = None, grad: Callable | None = None,
                tangent: Callable | None = None, emits: Sequence[str] | None = None, doc: str = "") -> Callable:
    """Register op ``type``; return its layer function ``f(*input_vars, name=None, **attrs)``.

    ``infer(ctx)`` gives the output types (``{slot: TensorType}``; default: each
    output typed like the first input); ``kernel(*arrays, **attrs)`` computes
    the outputs with numpy; ``grad(g, op)`` is a grad maker and ``tangent(g, op)``
    a tangent rule, both written with the expression builder (see
    design_docs/backward.md and forward_mode.md); give both or neither (an op
    without them lets no gradient through). ``emits`` lists the op types the
    two rules may record; the builder refuses any other.
    """
    if not isinstance(type, str) or not type.isidentifier():
        raise UserOpError(f"an op type is a name like 'softsign', got {type!r}")
    if type in OP_SCHEMAS:
        raise UserOpError(f"op type '{type}' exists already; pick another name (or unregister_op it first)")
    if (grad is None) != (tangent is None):
        missing = "tangent" if tangent is None else "grad"
        raise UserOpError(f"op '{type}': give both grad and tangent, or neither (the {missing} rule is missing; "
                          "every differentiable op has both, so forward and reverse mode cover the same ops)")
    if grad is not None and not emits:
        raise UserOpError(f"op '{type}': list the op types its grad and tangent rules record in emits=(...) "
                          "(the builder refuses any other, and `gradgen ops` shows them)")
    first, outs = inputs[0], list(outputs)

    def like_first(ctx):
        return {slot: ctx.input(first) for slot in outs}

    spec = schema(type, list(inputs), outs, infer or like_first,
                  {n: _attr(n, v) for n, v in (attrs or {}).items()}, doc=doc or f"user-defined op '{type}'")
    OP_SCHEMAS[type] = spec
    KERNELS[type] = _factory(kernel)  # type: ignore[index]
    if grad is not None:
        maker = grad_maker(type, emits=tuple(emits))(lambda g, op: grad(g, op))
        rule = tangent_rule(type, emits=tuple(emits))(lambda g, op: tangent(g, op))
        GRAD_MAKERS[type] = maker
        TANGENT_RULES[type] = rule
    USER_OPS.add(type)

    def layer(*xs, name: str | None = None, **attr_values):
        if len(xs) != len(inputs):
            raise UserOpError(f"op '{type}' takes {len(inputs)} inputs ({', '.join(inputs)}), got {len(xs)}")
        xs = [check_var(x, f"{type}'s {slot}") for x, slot in zip(xs, inputs)]
        block = default_main_program().current_block()
        base = name or block.program.unique_name(type)
        names = {slot: [base if k == 0 else f"{base}.{slot}"] for k, slot in enumerate(outs)}
        block.append_op(type, {slot: [x.name] for slot, x in zip(inputs, xs)}, names, attr_values)
        made = tuple(block.var(names[slot][0]) for slot in outs)
        return made[0] if len(made) == 1 else made

    layer.__name__ = type
    layer.__doc__ = spec.doc
    return named(layer)  # name= names its first output, and a name the program has is an error, as for layers


def unregister_op(type: str) -> None:
    """Remove a user-defined op from every table (ops gradgen defines cannot be removed)."""
    if type not in USER_OPS:
        raise UserOpError(f"'{type}' is not a user-defined op (registered: {', '.join(sorted(USER_OPS)) or 'none'})")
    for table in (OP_SCHEMAS, KERNELS, GRAD_MAKERS, TANGENT_RULES):
        table.pop(type, None)  # type: ignore[attr-defined]
    USER_OPS.discard(type)


__all__ = ["register_op", "unregister_op", "USER_OPS", "UserOpError"]
