"""ONNX exports derived from the ops' own math (``OpSchema.compute``): ``compute`` run over ``XP``, a namespace
whose arrays are ONNX values and whose functions add nodes, so the exported graph computes the engines' formula.

An op whose schema names one ONNX node (``OpSchema.onnx``) is exported as that node, except where ONNX Runtime's
CPU provider lacks the node in float64 (``NO_FLOAT64``): then, as every op with a ``compute`` and no node of its
own, from its formula. Formulas that need static shapes (a mean's count) cannot be traced here; such ops keep a
hand-written export (``export.OWN_EXPORTS`` says why).
"""
from __future__ import annotations

import operator
from types import SimpleNamespace
from typing import Callable

import numpy as np

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.schema import OpSchema

from .context import Lowering
from .graph import fill_value, onnx_dtype
from .lower_math import erf, log1p

__all__ = ["NO_FLOAT64", "NotTraceable", "Value", "XP", "derived_export"]

NO_FLOAT64 = frozenset({"Softplus", "Erf"})
"""ONNX operators ONNX Runtime's CPU provider has no float64 kernel for."""


class NotTraceable(Exception):
    """The formula asked for something an ONNX value does not know while exporting (a static shape)."""


class Value:
    """One ONNX value while a ``compute`` runs: its name, numpy dtype and rank, and the op being exported; for an
    input of the op, ``dims``, the shape its var declares (-1 where known only at run time), which an engine
    primitive that needs static sizes reads (``lower_conv.convolution``: the spatial sizes). A formula reads no
    shape (``shape`` raises): the one it would read may hold a run-time dim."""

    __slots__ = ("name", "dtype", "ndim", "ctx", "dims")

    def __init__(self, name: str, dtype, ndim: int, ctx: Lowering, dims: tuple[int, ...] | None = None):
        self.name, self.dtype, self.ndim, self.ctx, self.dims = name, np.dtype(dtype), ndim, ctx, dims

    @property
    def shape(self):
        raise NotTraceable("the formula reads a static shape")

    def astype(self, dtype) -> "Value":
        dtype = np.dtype(dtype)
        return self if dtype == self.dtype else _node("Cast", [self], dtype, to=onnx_dtype(dtype.name))

    # numpy's operators; a Python number joins as a constant of the other operand's dtype (numpy 2's rule)
    def __add__(self, other): return _binary("Add", self, other)
    def __radd__(self, other): return _binary("Add", other, self)
    def __sub__(self, other): return _binary("Sub", self, other)
    def __rsub__(self, other): return _binary("Sub", other, self)
    def __mul__(self, other): return _binary("Mul", self, other)
    def __rmul__(self, other): return _binary("Mul", other, self)
    def __truediv__(self, other): return _binary("Div", self, other)
    def __rtruediv__(self, other): return _binary("Div", other, self)
    def __pow__(self, other): return _binary("Pow", self, other)
    def __neg__(self): return _node("Neg", [self], self.dtype)
    def __gt__(self, other): return _binary("Greater", self, other, bool)
    def __ge__(self, other): return _binary("GreaterOrEqual", self, other, bool)
    def __lt__(self, other): return _binary("Less", self, other, bool)
    def __le__(self, other): return _binary("LessOrEqual", self, other, bool)
    def __eq__(self, other): return _binary("Equal", self, other, bool)  # type: ignore[override]
    def __ne__(self, other): return _not(self == other)  # type: ignore[override]
    def __and__(self, other): return _binary("And", self, other, bool)
    def __or__(self, other): return _binary("Or", self, other, bool)
    def __xor__(self, other): return _binary("Xor", self, other, bool)
    def __invert__(self): return _not(self)

    __hash__ = None  # type: ignore[assignment]
    __array_ufunc__ = None  # numpy defers to these operators when an array stands on the left


def _node(op_type: str, inputs: list["Value"], dtype, **attrs) -> Value:
    ctx = inputs[0].ctx
    return Value(ctx.g.node(op_type, [v.name for v in inputs], **attrs), dtype, max(v.ndim for v in inputs), ctx)


def _values(*operands) -> list[Value]:
    """The operands as Values: Python numbers (and 0-d arrays) become constants of the first Value's dtype."""
    like = next(o for o in operands if isinstance(o, Value))
    return [o if isinstance(o, Value) else Value(like.ctx.scalar(o, like.dtype.name), like.dtype, 0, like.ctx)
            for o in operands]


def _binary(op_type: str, a, b, dtype=None) -> Value:
    a, b = _values(a, b)
    return _node(op_type, [a, b], a.dtype if dtype is None else dtype)


def _not(a: Value) -> Value:
    return _node("Not", [a], bool)


def _unary(op_type: str) -> Callable[[Value], Value]:
    return lambda x: _node(op_type, [x], x.dtype)


def _where(condition, x, y) -> Value:
    like = next(o for o in (x, y) if isinstance(o, Value))
    c, (x, y) = _values(condition)[0], _values(like, x, y)[1:]
    return _node("Where", [c, x, y], x.dtype)


def _clip(x: Value, low, high) -> Value:
    x, low, high = _values(x, low, high)
    return _node("Clip", [x, low, high], x.dtype)


def _full_like(x: Value, value, dtype=None) -> Value:
    """``value`` everywhere in X's run-time shape (``ConstantOfShape`` of its ``Shape``), as ``dtype`` or X's."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    shape = x.ctx.g.node("Shape", [x.name])
    return Value(x.ctx.g.node("ConstantOfShape", [shape], value=fill_value(value, dtype.name)), dtype, x.ndim, x.ctx)


def _variadic(op_type: str) -> Callable[..., Value]:
    return lambda a, b: _binary(op_type, a, b)


XP = SimpleNamespace(
    add=operator.add, subtract=operator.sub, multiply=operator.mul, divide=operator.truediv, pow=operator.pow,
    maximum=_variadic("Max"), minimum=_variadic("Min"), where=_where, clip=_clip,
    equal=operator.eq, not_equal=operator.ne, greater=operator.gt, greater_equal=operator.ge, less=operator.lt,
    less_equal=operator.le, logical_and=operator.and_, logical_or=operator.or_, logical_xor=operator.xor,
    logical_not=_not,
    **{schema.compute.xp_name: _unary(schema.onnx) for schema in OP_SCHEMAS.values()
       if hasattr(schema.compute, "xp_name") and schema.onnx and len(schema.inputs) == 1
       and schema.onnx not in NO_FLOAT64},
    expm1=lambda x: _unary("Exp")(x) - 1,
    log1p=lambda x: Value(log1p(x.ctx, x.name, x.dtype.name), x.dtype, x.ndim, x.ctx),
    erf=lambda x: Value(erf(x.ctx, x.name, x.dtype.name), x.dtype, x.ndim, x.ctx),
    isdtype=lambda dtype, kind: np.isdtype(np.dtype(dtype), kind),
    asarray=lambda value, dtype=None: np.asarray(value, dtype=dtype),
    full=lambda shape, value, dtype=None: np.full(shape, value, dtype=dtype), full_like=_full_like,
    float16=np.float16, float32=np.float32, float64=np.float64,
)
"""The ONNX graph as ``xp``: what the ops' formulas use of numpy. ``xp.<name>`` of an op whose compute is that one
function (``schema.xp_function``) and whose schema names one ONNX node is that node; ``expm1`` is exp - 1 (ONNX
has no Expm1), ``erf`` and ``log1p`` are the float64-exact forms of ``lower_math``; ``full`` is a constant (the
exporter stores it as one), ``full_like`` a ``ConstantOfShape`` of the run-time shape."""


def _one_node(onnx_op: str, schema: OpSchema) -> Callable[[Lowering], None]:
    """The op as its one ONNX node; where every input is an integer (or bool) and the output floating, the inputs
    cast to the output's dtype first, as the compute promotes them (integers divide truly: ONNX's Div of integers
    truncates)."""
    def lower(ctx: Lowering) -> None:
        declared = np.dtype(ctx.out_var(schema.outputs[0].name).dtype)
        inputs = [ctx.x(slot.name) for slot in schema.inputs]
        kinds = {np.dtype(ctx.dtype(slot.name)).kind for slot in schema.inputs}
        if declared.kind == "f" and kinds <= set("biu"):
            inputs = [ctx.g.node("Cast", [x], to=onnx_dtype(declared.name)) for x in inputs]
        ctx.emit(onnx_op, inputs)

    return lower


def _traced(schema: OpSchema, xp: SimpleNamespace) -> Callable[[Lowering], None]:
    def lower(ctx: Lowering) -> None:
        (out,) = schema.outputs  # one output: an op with several keeps its own export (``OWN_EXPORTS``)
        args = [Value(ctx.x(s.name), ctx.dtype(s.name), ctx.rank(s.name), ctx, tuple(ctx.var(s.name).shape))
                for s in schema.inputs]
        result = schema.compute(xp, *args, **{name: ctx.attr(name) for name in schema.attrs})
        declared = np.dtype(ctx.out_var(out.name).dtype)
        if not isinstance(result, Value):  # a constant formula: the value as the declared dtype
            result = Value(ctx.g.const(np.asarray(result, declared)), declared, 0, ctx)
        ctx.finish(result.astype(declared).name, slot=out.name)

    return lower


def derived_export(schema: OpSchema, xp: SimpleNamespace) -> Callable[[Lowering], None]:
    """The export of an op with a ``compute``: its one ONNX node where it has one ONNX Runtime can run in every
    dtype it takes, else its formula traced into nodes over ``xp`` (``XP`` and the exporter's primitives:
    ``export.XP``)."""
    if schema.onnx and schema.onnx not in NO_FLOAT64:
        return _one_node(schema.onnx, schema)
    return _traced(schema, xp)

