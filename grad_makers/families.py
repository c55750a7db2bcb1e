"""One helper per family of rules, so that registering a member is one line that shows its formula.

    sin_grad = from_input("sin", emits=("cos", "elementwise_mul"), slope=lambda g, x: g.cos(x))

Each helper turns a short rule into a maker (``base.Maker``). A rule's first
parameters are fixed by its family (the builder ``g``, then values such as
``x``, ``out``, ``dout``); any further parameter is filled by name: ``op``
gets the forward op's ``GradContext``, any other name the forward op's attr of
that name (``lambda g, x, factor: ...`` for ``pow``), as JAX passes a
primitive's params to its rules. Names are checked against the op schemas
when the helper is called.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.shapes import normalize_axes

from .base import GradContext, Maker, grad_maker
from .builder import Builder


def _extra_params(rule: Callable, fixed: int, op_types: tuple[str, ...]) -> tuple[str, ...]:
    """The names of ``rule``'s parameters after the first ``fixed``: ``op`` or attrs of every op type."""
    names = tuple(inspect.signature(rule).parameters)[fixed:]
    for name in names:
        for t in op_types:
            if name != "op" and name not in OP_SCHEMAS[t].attrs:
                raise TypeError(f"rule parameter '{name}' is neither 'op' nor an attr of '{t}'")
    return names


def _extras(names: tuple[str, ...], op: GradContext) -> dict[str, Any]:
    return {n: op if n == "op" else op.attr(n) for n in names}


def _register(op_types: tuple[str, ...], emits: tuple[str, ...], maker: Maker, rule: Any) -> Maker:
    maker.rule = rule  # type: ignore[attr-defined]  # the formula the maker applies, kept for inspection
    return grad_maker(*op_types, emits=emits)(maker)


def unary(*op_types: str, emits: tuple[str, ...], rule: Callable) -> Maker:
    """``dx = rule(g, x, out, dout, ...)`` for an op with input ``X`` and output ``Out``."""
    extra = _extra_params(rule, 4, op_types)

    def maker(g: Builder, op: GradContext):
        x, out, dout = op.input("X"), op.output("Out"), op.grad("Out")
        return {"X": rule(g, x, out, dout, **_extras(extra, op)) if extra else rule(g, x, out, dout)}

    return _register(op_types, emits, maker, rule)


def _chain(op_types, emits, slope, of_output: bool) -> Maker:
    extra = _extra_params(slope, 2, op_types)

    def maker(g: Builder, op: GradContext):
        v = op.output("Out") if of_output else op.input("X")
        return {"X": g.mul(op.grad("Out"), slope(g, v, **_extras(extra, op)) if extra else slope(g, v))}

    # f' and what it reads, for forward mode to reuse as the tangent rule dout = f'(x) * dx
    maker.slope, maker.slope_of = slope, ("Out" if of_output else "X")  # type: ignore[attr-defined]
    return _register(op_types, emits, maker, slope)


def from_input(*op_types: str, emits: tuple[str, ...], slope: Callable) -> Maker:
    """``dx = dout * slope(g, x, ...)``: a unary op whose derivative f'(x) is computed from its input."""
    return _chain(op_types, emits, slope, of_output=False)


def from_output(*op_types: str, emits: tuple[str, ...], slope: Callable) -> Maker:
    """``dx = dout * slope(g, out, ...)``: a unary op whose derivative is cheaper from its output (exp)."""
    return _chain(op_types, emits, slope, of_output=True)


def linear(*op_types: str, emits: tuple[str, ...], transpose: Callable, slot: str = "X", out: str = "Out") -> Maker:
    """An op linear in input ``slot``: its gradient is ``transpose(g, dout, ...)``, the adjoint map applied to dout.

    Its other inputs (a shape to match, indices, a mask) get no gradient.
    """
    extra = _extra_params(transpose, 2, op_types)

    def maker(g: Builder, op: GradContext):
        dout = op.grad(out)
        return {slot: transpose(g, dout, **_extras(extra, op)) if extra else transpose(g, dout)}

    return _register(op_types, emits, maker, transpose)


def same_at_run_time(shape, full_shape, met=()) -> bool:
    """Whether a value of ``shape`` that was broadcast against the shapes ``met`` into ``full_shape`` provably
    kept ``full_shape`` at run time (so its gradient needs no sum back).

    The shapes must be equal, and no -1 dim may have met another -1 dim: x [-1, 3] fed (1, 3) and y [-1, 3]
    fed (4, 3) broadcast to (4, 3), which no declared shape says. (A known size n > 1 against -1 makes the
    output's dim n, so the shapes differ and the sum back happens anyway.)
    """
    shape, full = tuple(shape), tuple(full_shape)
    if shape != full:
        return False
    for i in range(1, len(shape) + 1):
        if shape[-i] == -1 and any(len(m) >= i and m[-i] == -1 for m in met):
            return False
    return True


def summed_back(g: Builder, op: GradContext, grad, like: str, full_shape, met=()) -> Any:
    """``grad`` has shape ``full_shape``; sum it back to ``like``'s run-time shape (``reduce_as``) unless
    ``like`` provably has that shape (``same_at_run_time``: ``met`` holds the shapes it was broadcast against).
    """
    return grad if same_at_run_time(op.shape(like), full_shape, met) else g.reduce_as(grad, like)


def binary(*op_types: str, emits: tuple[str, ...], dx: Callable | None, dy: Callable | None) -> Maker:
    """Elementwise ``out = f(x, y)`` with broadcasting: ``dx(g, x, y, out, dout, ...)`` is x's gradient at
    the output's shape (None: dout itself), summed back to x's shape; the same for ``dy``."""
    extra = {slot: _extra_params(rule, 5, op_types) for slot, rule in (("X", dx), ("Y", dy)) if rule is not None}

    def maker(g: Builder, op: GradContext):
        x, y, out, dout = op.input("X"), op.input("Y"), op.output("Out"), op.grad("Out")
        full = op.shape(out)
        grads = {}
        for slot, like, other, rule in (("X", x, y, dx), ("Y", y, x, dy)):
            grad = dout if rule is None else rule(g, x, y, out, dout, **_extras(extra[slot], op))
            grads[slot] = summed_back(g, op, grad, like, full, met=() if other == like else (op.shape(other),))
        return grads

    return _register(op_types, emits, maker, (dx, dy))


def reduced_axes(op: GradContext) -> list[int]:
    """The axes a ``reduce_*`` op reduced, normalized and sorted."""
    rank = len(op.shape(op.input("X")))
    dim = op.attr("dim")
    if op.attr("reduce_all") or not dim:
        return list(range(rank))
    return sorted(normalize_axes(dim, rank))


def kept(g: Builder, op: GradContext, value) -> Any:
    """``value`` (shaped like a reduction's output) with the reduced axes put back as size 1."""
    axes = reduced_axes(op)
    if op.attr("keep_dim") or len(axes) == len(op.shape(op.input("X"))):  # a scalar broadcasts as it is
        return value
    return g.unsqueeze(value, axes)


def reduction(*op_types: str, emits: tuple[str, ...], rule: Callable) -> Maker:
    """``dx = rule(g, x, out, dout, ...)`` for a ``reduce_*`` op, with ``out`` and ``dout`` given the reduced
    axes back as size 1, so they broadcast against ``x``."""
    extra = _extra_params(rule, 4, op_types)

    def maker(g: Builder, op: GradContext):
        x = op.input("X")
        out, dout = kept(g, op, op.output("Out")), kept(g, op, op.grad("Out"))
        return {"X": rule(g, x, out, dout, **_extras(extra, op))}

    return _register(op_types, emits, maker, rule)


__all__ = ["unary", "from_input", "from_output", "linear", "binary", "reduction", "summed_back", "same_at_run_time",
           "kept",
           "reduced_axes"]
