"""Op schemas: every op type declared once, as data.

A schema names an op's input and output slots, its attrs with kinds and
defaults, and a compile-time function that infers output shapes and dtypes
from input shapes and dtypes. ``program.ops.OP_SCHEMAS`` is the table of all
of them; ``program.validate`` checks an op against its schema.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Union

from .dtypes import DTYPES
from .errors import ShapeInferenceError
from .tracked import FrozenList, frozen


class TensorType(NamedTuple):
    """What compile time knows of a tensor: its shape (-1 = unknown dim) and dtype."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Slot:
    """An input or output slot. ``duplicable`` slots hold any number of vars; ``optional`` ones may be absent."""

    name: str
    duplicable: bool = False
    optional: bool = False


REQUIRED = object()  # marks an attr without a default


@dataclass(frozen=True)
class Attr:
    """An attr's kind (see ``ATTR_KINDS``) and its default (``REQUIRED`` when it must be given)."""

    kind: str
    default: Any = REQUIRED


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool))


def _coerce_int(v):
    if hasattr(v, "__index__") and not isinstance(v, bool):
        return int(v.__index__())
    raise TypeError


def _coerce_float(v):
    if _is_number(v) or (hasattr(v, "dtype") and getattr(v, "shape", None) == ()):
        return float(v)
    raise TypeError


def _coerce_scalar(v):
    """A number as an int when it is one (so int64 values above 2**53 stay exact), else as a float."""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return int(v)
    if hasattr(v, "__index__"):
        return int(v.__index__())
    return _coerce_float(v)


def _coerce_bool(v):
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return bool(v)
    raise TypeError


def _coerce_str(v):
    if isinstance(v, str):
        return v
    raise TypeError


def _coerce_list(item):
    def coerce(v):
        if isinstance(v, (list, tuple)):
            return FrozenList([item(x) for x in v])  # an op's list attrs are values (tracked.py)
        raise TypeError

    return coerce


def _coerce_dtype(v):
    if v in DTYPES:
        return v
    raise TypeError


def _coerce_optional(inner):
    def coerce(v):
        return None if v is None else inner(v)

    return coerce


ATTR_KINDS: Mapping[str, Callable[[Any], Any]] = {
    "int": _coerce_int,
    "float": _coerce_float,
    "scalar": _coerce_scalar,
    "bool": _coerce_bool,
    "str": _coerce_str,
    "ints": _coerce_list(_coerce_int),
    "floats": _coerce_list(_coerce_float),
    "dtype": _coerce_dtype,
    "block": _coerce_int,
    "optional_int": _coerce_optional(_coerce_int),
    "optional_float": _coerce_optional(_coerce_float),
    "strs": _coerce_list(_coerce_str),
    "optional_dtype": lambda v: "" if v in ("", None) else _coerce_dtype(v),
}
"""How each attr kind turns a Python value into its canonical, JSON-able form (TypeError if it cannot)."""


class InferContext:
    """What a schema's infer function sees: input types by slot and the op's attrs."""

    __slots__ = ("op_type", "_inputs", "_attrs", "_program")

    def __init__(self, op_type: str, inputs: Mapping[str, list[TensorType]], attrs: Mapping[str, Any],
                 program: Any = None):
        self.op_type = op_type
        self._inputs = inputs
        self._attrs = attrs
        self._program = program

    def input(self, slot: str) -> TensorType:
        """The type of the single var in ``slot``."""
        return self._inputs[slot][0]

    def inputs(self, slot: str) -> list[TensorType]:
        """The types of every var in ``slot`` (empty for an absent optional slot)."""
        return self._inputs.get(slot, [])

    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def attr(self, name: str) -> Any:
        return self._attrs[name]

    def block_var(self, block_attr: str, name: str) -> TensorType:
        """The type of var ``name`` in the sub-block named by attr ``block_attr`` (control-flow ops)."""
        blocks = self._program.blocks if self._program is not None else []
        idx = self._attrs[block_attr]
        if not 0 <= idx < len(blocks):
            self.fail(f"attr {block_attr}={idx} names no block of the program")
        var = blocks[idx].find_var(name)
        if var is None:
            self.fail(f"block {idx} (attr {block_attr}) has no var '{name}'")
        return TensorType(var.shape, var.dtype)

    def fail(self, message: str):
        """Reject the op's inputs or attrs; the caller adds the block, op and vars."""
        raise ShapeInferenceError(message)


InferFn = Callable[[InferContext], Mapping[str, Any]]
DtypeRule = Union[tuple[str, ...], str]
"""What one slot or dtype attr accepts: the dtypes themselves, or the name of the slot whose dtype it shares."""
"""Returns, per output slot, a TensorType (or a list of them for a duplicable slot)."""


class OnnxMapping(NamedTuple):
    """An op as one ONNX node, both ways: ``to_onnx(ctx)`` emits the node from the op (the ONNX exporter's
    lowering context), ``from_onnx(ctx)`` builds the op from the node (the importer's translation context).
    ``to_onnx`` None: the export is the op's ``compute`` traced into ONNX nodes, as for an op without a mapping
    (a convolution: its ``xp.convolution`` is the exporter's ``Conv``)."""

    node: str
    to_onnx: Callable[[Any], None] | None
    from_onnx: Callable[[Any], None]


@dataclass(frozen=True)
class OpSchema:
    """Everything compile time knows of one op type."""

    type: str
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    infer: InferFn
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    doc: str = ""
    stateful: bool = False
    """True for ops whose result depends on more than their inputs (random ops): never deduplicated."""
    dtypes: Mapping[str, DtypeRule] = field(default_factory=dict)
    """The dtypes the op accepts, for each input slot and each attr of kind dtype: a tuple of dtypes, or the
    name of another input slot whose dtype it must have (``{"X": NUMERIC_DTYPES, "Y": "X"}``). Building an op
    checks them before inference (``validate.check_dtypes``); the registry test runs every dtype listed."""
    compute: Callable[..., Any] | None = None
    """The op's computation, written once over an array namespace: ``compute(xp, *inputs, **attrs)`` returns the
    output (a tuple for several) from the input arrays flat in slot order and every attr by name. ``xp`` is an
    engine's namespace (``numpy``, ``jax.numpy``) with the array API's functions and ``erf``; the engines
    derive their kernels and lowerings from it (``design_docs/adding_an_op.md``) and cast a result to the
    declared dtype only where it differs. None: each engine writes its own (a convolution, a loop)."""
    onnx: str | None = None
    """The ONNX operator that is this op as one node (the same inputs in order and one output, attrs of the same
    names): the exporter and the importer take their one-node entries from it."""
    onnx_mapping: "OnnxMapping | None" = None
    """The op's one ONNX node where inputs, outputs or attrs differ by more than ``onnx`` can say (an output
    Variance where the node gives InvStdDev): the node's name and the two translations, written beside the schema
    in the op's family module; the exporter and the importer gather them from here."""
    aten: Callable[..., Any] | None = None
    """The op as one call of PyTorch's ATen operators, where that one call measures faster than ``compute`` run
    over torch a pass per term: ``aten(ops, *inputs, **attrs)`` with ``ops`` = ``torch.ops.aten`` and the inputs
    and attrs as ``compute`` takes them; it returns None where it would part from ``compute`` on the values it is
    given (an exp that would overflow). It must give what ``compute`` gives on the finite float32 and float64
    values it takes; the torch engine calls it only on those (every input of the op's dtype, none empty, all
    finite) and runs ``compute`` elsewhere. Written beside the schema with the measurement that justifies it, as
    ``onnx`` names the op's one ONNX node; nothing here imports torch. An op of several outputs returns them as
    ``compute`` does, a tuple."""
    aten_any_values: bool = False
    """True where ``aten`` meets NaN, infinities and overflow as ``compute`` does (its passes are the compute's
    IEEE operations, a multiply-add fused only where no product can overflow), or declines them, so the torch
    engine calls it on any float32 and float64 values, without summing every input first to prove it finite (for
    an optimizer update, four sums of the parameter's size would cost what the call saves)."""
    aten_finite_out: bool = False
    """True where ``aten``'s (first) result is finite whenever the call does not decline the inputs it is given
    (every input finite, unless ``aten_any_values``): the torch engine then knows it finite, and the next kernel
    that would sum it to prove so does not. With ``aten_any_values`` as well, the call declines every input that is
    not finite, and the engine knows the inputs finite too where it does not. Written beside the measurement, with
    the reason it holds."""
    finite_from_finite: bool = False
    """True where the output is finite whenever every input is, for every value, with no overflow anywhere (relu's
    max(x, 0), abs, a bounded function such as sin): the torch engine then knows the output finite where it knows
    every input so, and the next kernel that would sum it to prove so does not (ResNet's relu outputs, each read
    by a convolution that needs its operands finite)."""
    finite_out_proves: tuple[str, ...] = ()
    """The input slots a finite output proves finite, for every value: each of their elements is added into some
    output element (a sum, a mean), and an IEEE sum with an infinity or a NaN among its terms is not finite. After
    such a kernel whose output is much smaller than those inputs, the torch engine sums the output, and where it is
    finite knows the inputs finite: the products that read the same values next sum nothing (the transformer
    block's bias gradients, each a ``reduce_as`` of the gradient its layer's two products read)."""
    multiply_adds: "Callable[[Any, Callable[[str], tuple[int, ...]]], int] | None" = None
    """The op's products, which dominate its cost: ``multiply_adds(op, shape)`` counts one run's multiply-adds,
    ``shape(name)`` giving each var's run-time shape. None: an op whose work is about one step per element.
    The FLOP estimate (``tools/modes``) and ``auto``'s weighing of an engine by its convolutions read it."""
    inputs_as_given: bool = False
    """True: the engines hand ``compute`` its inputs in the dtypes they come in, never cast to the declared output
    dtype first (``backend/derive.uncast_inputs``): an op that converts dtypes itself (a float64 cast to float16 by
    jax or torch rounds twice, through float32) or reads only its input's shape (a fill shaped like its input)."""
    tables: "SchemaTables" = field(init=False, repr=False, compare=False)
    """Lookups derived once from the fields above, so checking an op against its schema does not rebuild them."""

    def __post_init__(self):
        object.__setattr__(self, "tables", SchemaTables.of(self))

    def input_slot(self, name: str) -> Slot | None:
        for s in self.inputs:
            if s.name == name:
                return s
        return None

    def output_slot(self, name: str) -> Slot | None:
        for s in self.outputs:
            if s.name == name:
                return s
        return None


class SchemaTables(NamedTuple):
    """Slots by name and the attrs in sorted order, with the defaults every op of the type starts from.

    ``defaults`` holds, in sorted name order, each attr that has a default;
    ``required`` names the attrs without one. An op given no attrs gets a copy
    of ``defaults`` (valid only when ``required`` is empty).
    """

    inputs: dict[str, Slot]
    outputs: dict[str, Slot]
    attr_names: tuple[str, ...]
    defaults: dict[str, Any]
    required: tuple[str, ...]

    @staticmethod
    def of(schema: "OpSchema") -> "SchemaTables":
        names = tuple(sorted(schema.attrs))
        return SchemaTables({s.name: s for s in schema.inputs}, {s.name: s for s in schema.outputs}, names,
                            {n: frozen(schema.attrs[n].default) for n in names
                             if schema.attrs[n].default is not REQUIRED},
                            tuple(n for n in names if schema.attrs[n].default is REQUIRED))


def xp_function(name: str) -> Callable[..., Any]:
    """The ``compute`` of an op that is one function of the array namespace: ``xp.<name>(*inputs)`` (as
    PyTensor's ``nfunc_spec`` names numpy's function for an elementwise op)."""
    def compute(xp, *inputs):
        return getattr(xp, name)(*inputs)

    compute.__name__ = compute.__qualname__ = name
    compute.xp_name = name
    return compute


def same_as(slot: str, out: str = "Out") -> InferFn:
    """Infer function for ops whose single output has the type of input ``slot``."""

    def infer(ctx: InferContext):
        return {out: ctx.input(slot)}

    return infer


def schema(type: str, inputs, outputs, infer: InferFn, attrs: Mapping[str, Attr] | None = None, doc: str = "",
           **kw) -> OpSchema:
    """Shorthand: slots may be given as names (``"X"``) or ``Slot`` objects."""
    as_slot = lambda s: s if isinstance(s, Slot) else Slot(s)  # noqa: E731
    return OpSchema(type, tuple(map(as_slot, inputs)), tuple(map(as_slot, outputs)), infer, dict(attrs or {}), doc,
                    **kw)


__all__ = [
    "TensorType", "Slot", "REQUIRED", "Attr", "ATTR_KINDS", "InferContext", "InferFn", "DtypeRule", "OnnxMapping",
    "OpSchema", "SchemaTables",
    "same_as", "schema", "xp_function"
]
