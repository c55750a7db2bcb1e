"""An expression builder for rules: methods named after op types record op descriptions and return their results.

    g = Builder()
    dx = g.mul(dout, g.cos(x))          # two ops recorded; dx is a Ref, named only when the recording finishes
    descs = g.finish([("x@GRAD", dx)], fresh=lambda label: f"tmp@{label}")

``finish`` writes each wanted result to its given name (the op that makes it
writes there, or an ``assign`` copies an existing var), drops the ops no wanted
result needs, and names the remaining temporaries through ``fresh``. So a rule
may compute every input's gradient and let the caller keep the wanted ones.
Nothing here knows about gradients: the same builder can serve forward-mode
tangent rules. A ``SubBlock`` records a control-flow op's sub-block for the
pass to build.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from gradgen.program.errors import GradgenError
from gradgen.program.schema import TensorType


class RuleError(GradgenError):
    """A rule recorded an op it did not declare, or gave the builder something it cannot record."""


class Ref:
    """A value an op of the recording makes (a builder method's result; an existing var is a plain name).

    ``name`` is set when the recording is finished.

    ``zero_like`` marks a symbolic zero: a value known to be all zeros, shaped
    like that var, that costs no op until something must read it.
    """

    __slots__ = ("label", "name", "zero_like")

    def __init__(self, label: str):
        self.label = label
        self.name: str | None = None
        self.zero_like: str | None = None

    def prefix(self) -> str:
        """The label a fresh name is made from: the op type, shortened (``mul`` for ``elementwise_mul``)."""
        return self.label.removeprefix("elementwise_")

    def __repr__(self) -> str:
        return f"Ref({self.name or '?' + self.label})"


@dataclass(slots=True)
class OpDesc:
    """One op to append: type, ``slot -> [names]`` for inputs and outputs, attrs."""

    type: str
    inputs: dict[str, list]
    outputs: dict[str, list]
    attrs: dict[str, Any] = field(default_factory=dict)


class Builder:
    """Records op descriptions; each op method returns its result(s).

    ``allowed``, when given, is the set of op types the rule declared
    (``emits``): recording any other type is a ``RuleError`` at once.
    """

    __slots__ = ("descs", "blocks", "_allowed")

    def __init__(self, allowed: frozenset[str] | None = None):
        self.descs: list = []
        self.blocks: list[SubBlock] = []
        self._allowed = allowed

    # -- the general case ------------------------------------------------------
    def op(self, type: str, inputs: Mapping[str, Any], attrs: Mapping[str, Any] | None = None,
           outputs: str | Mapping[str, int] = "Out", into: str | None = None):
        """Record one op. ``inputs`` maps slots to a value or a list of values.

        ``outputs`` is the one output slot (returns its value; ``into`` names
        it instead of a fresh temporary) or ``{slot: count}`` (returns
        ``{slot: [values]}``).
        """
        if self._allowed is not None and type not in self._allowed:
            raise RuleError(f"the rule records a '{type}' op, which its emits {sorted(self._allowed)} do not list")
        ins = {}
        for slot, v in inputs.items():  # a loop, not a comprehension: this runs for every op a rule records
            ins[slot] = list(v) if isinstance(v, (list, tuple)) else [v]
        if outputs.__class__ is str:
            result = into if into is not None else Ref(type)
            self.descs.append(OpDesc(type, ins, {outputs: [result]}, dict(attrs) if attrs else {}))
            return result
        outs = {slot: [Ref(slot.lower()) for _ in range(count)] for slot, count in outputs.items()}
        self.descs.append(OpDesc(type, ins, {slot: list(refs) for slot, refs in outs.items()}, dict(attrs or {})))
        return outs

    # -- one method per op type the rules use; each records the op and returns its result(s) ---------------------
    def scale(self, x, scale: float = 1.0, bias: float = 0.0):
        """``scale * x + bias``."""
        return self.op("scale", {"X": x}, {"scale": scale, "bias": bias})

    def add(self, x, y): return self.op("elementwise_add", {"X": x, "Y": y})
    def sub(self, x, y): return self.op("elementwise_sub", {"X": x, "Y": y})
    def mul(self, x, y): return self.op("elementwise_mul", {"X": x, "Y": y})
    def div(self, x, y): return self.op("elementwise_div", {"X": x, "Y": y})
    def elementwise_pow(self, x, y): return self.op("elementwise_pow", {"X": x, "Y": y})
    def compare(self, op_type: str, x, y): return self.op(op_type, {"X": x, "Y": y})  # equal, less_than, ...
    def neg(self, x): return self.scale(x, -1.0)
    def pow(self, x, factor: float): return self.op("pow", {"X": x}, {"factor": factor})  # a constant exponent
    def cos(self, x): return self.op("cos", {"X": x})
    def sin(self, x): return self.op("sin", {"X": x})
    def exp(self, x): return self.op("exp", {"X": x})
    def log(self, x): return self.op("log", {"X": x})
    def square(self, x): return self.op("square", {"X": x})
    def sigmoid(self, x): return self.op("sigmoid", {"X": x})
    def sign(self, x): return self.op("sign", {"X": x})
    def cast(self, x, dtype: str): return self.op("cast", {"X": x}, {"out_dtype": dtype})

    def reduce_sum(self, x, dim: Sequence[int], keep_dim: bool = False):
        return self.op("reduce_sum", {"X": x}, {"dim": list(dim), "keep_dim": keep_dim})

    def reduce_mean(self, x, dim: Sequence[int], keep_dim: bool = False):
        return self.op("reduce_mean", {"X": x}, {"dim": list(dim), "keep_dim": keep_dim})

    def unsqueeze(self, x, axes: Sequence[int]): return self.op("unsqueeze", {"X": x}, {"axes": list(axes)})
    def squeeze(self, x, axes: Sequence[int]): return self.op("squeeze", {"X": x}, {"axes": list(axes)})
    def transpose(self, x, perm: Sequence[int]): return self.op("transpose", {"X": x}, {"perm": list(perm)})
    def reshape(self, x, shape: Sequence[int]): return self.op("reshape", {"X": x}, {"shape": list(shape)})
    def concat(self, xs: Sequence, axis: int): return self.op("concat", {"X": list(xs)}, {"axis": axis})
    # ``like`` is a var whose run-time shape the result takes (reduce_as: the adjoint of broadcasting)
    def broadcast_to(self, x, like): return self.op("broadcast_to", {"X": x, "ShapeLike": like})
    def reduce_as(self, x, like): return self.op("reduce_as", {"X": x, "Target": like})
    def reshape_as(self, x, like): return self.op("reshape_as", {"X": x, "Target": like})
    def where(self, condition, x, y): return self.op("where", {"Condition": condition, "X": x, "Y": y})
    def fill_zeros_like(self, x): return self.op("fill_zeros_like", {"X": x})
    def one_hot(self, x, depth: int, dtype: str): return self.op("one_hot", {"X": x}, {"depth": depth, "dtype": dtype})

    def split(self, x, axis: int, sections: Sequence[int]) -> list:
        return self.op("split", {"X": x}, {"axis": axis, "sections": list(sections)},
                       outputs={"Out": len(sections)})["Out"]

    def gather(self, x, index, axis: int = 0, into: str | None = None):
        return self.op("gather", {"X": x, "Index": index}, {"axis": axis}, into=into)

    def matmul(self, x, y, transpose_x: bool = False, transpose_y: bool = False):
        return self.op("matmul", {"X": x, "Y": y}, {"transpose_x": transpose_x, "transpose_y": transpose_y})

    def fill_constant(self, shape: Sequence[int], dtype: str, value: float):
        return self.op("fill_constant", {}, {"shape": list(shape), "dtype": dtype, "value": value})

    @staticmethod
    def named(label: str, value):
        """``value``, whose temporary name (if it gets one) is made from ``label`` instead of its op type."""
        if type(value) is Ref:
            value.label = label
        return value

    # -- sub-blocks -------------------------------------------------------------
    def sub_block(self) -> "SubBlock":
        """A new sub-block to record into; pass it as a ``block`` attr of a control-flow op."""
        block = SubBlock()
        self.blocks.append(block)
        return block

    def reads(self, *blocks: "SubBlock") -> "ReadsOf":
        """For a control-flow op's ``Input`` slot: every outer var ``blocks`` read, once they are built."""
        return ReadsOf(list(blocks))

    # -- finishing --------------------------------------------------------------
    def finish(self, results: Sequence[tuple[str, Any]], fresh: Callable[[str], str]) -> list[OpDesc]:
        """Write each ``(name, value)`` of ``results`` to ``name``; drop unneeded ops; name the rest.

        A value this builder made that no other result took is written by the
        op that makes it; any other value (an existing var, or a value already
        written elsewhere) is copied by an ``assign``.
        """
        descs = self.descs
        if len(descs) == 1 and len(results) == 1 and self._written_directly(descs[0], *results[0]):
            return descs  # the common case: one op, whose inputs are given names, writes the one result
        live: set = set()
        for name, value in results:
            if type(value) is Ref and value.name is None:
                value.name = name
            else:
                descs.append(self._copy(value, name))
            live.add(value)
        kept = []
        for desc in reversed(descs):  # keep an op if it writes a live value or a given name
            if not any(type(r) is str or r in live for refs in desc.outputs.values() for r in refs):
                continue
            kept.append(desc)
            for refs in desc.inputs.values():
                live.update(refs)
        kept.reverse()
        for desc in kept:  # in program order, so temporaries are numbered as they are made
            for refs in desc.outputs.values():
                for k, r in enumerate(refs):
                    if type(r) is Ref:
                        if r.name is None:
                            r.name = fresh(r.prefix())
                        refs[k] = r.name
            for refs in desc.inputs.values():
                for k, r in enumerate(refs):
                    if type(r) is Ref:
                        refs[k] = r.name
        return kept

    @staticmethod
    def _written_directly(desc: OpDesc, name: str, value) -> bool:
        """If ``desc`` has one output and it is ``value``, write it to ``name``; whether it was."""
        outs = desc.outputs
        if len(outs) != 1 or type(value) is not Ref or value.name is not None:
            return False
        (refs,) = outs.values()
        if len(refs) != 1 or refs[0] is not value:
            return False
        value.name = refs[0] = name
        return True

    def _copy(self, value, name: str) -> OpDesc:
        if self._allowed is not None and "assign" not in self._allowed:
            raise RuleError(f"the rule returns {value!r} for '{name}', which needs an 'assign' its emits do not list")
        return OpDesc("assign", {"X": [value]}, {"Out": [name]}, {})


@dataclass
class CopyVars:
    """Declare a forward block's vars in the sub-block (same names and types)."""

    block: int


@dataclass
class CopyOps:
    """Append copies of a forward block's ops to the sub-block (a recompute of that block)."""

    block: int


@dataclass
class Differentiate:
    """Differentiate ``targets`` (seeded with ``seeds``; None: no gradient) with respect to ``wrt``.

    ``results[k]`` becomes the gradient of ``wrt[k]``, or a symbolic zero
    shaped like it when the targets do not depend on it.
    """

    targets: list
    seeds: list
    wrt: list[str]
    results: list[Ref]


@dataclass(eq=False)
class ReadsOf:
    """Placeholder for the outer vars that ``blocks`` read (known once they are built)."""

    blocks: list


class SubBlock(Builder):
    """The recorded contents of a sub-block: parameters, ops and steps in order, and its results.

    The pass that owns the control-flow op builds it (``idx`` is set then);
    a ``SubBlock`` itself never touches a program.
    """

    __slots__ = ("params", "results", "idx")

    def __init__(self):
        super().__init__(None)
        self.params: list[tuple[Ref, TensorType]] = []
        self.results: list = []
        self.idx: int | None = None

    def param(self, var_type: TensorType, label: str) -> Ref:
        """A parameter of the block (bound by the owning op), declared with ``var_type``."""
        ref = Ref(label)
        self.params.append((ref, var_type))
        return ref

    def copy_vars(self, block: int) -> None:
        self.descs.append(CopyVars(block))

    def copy_ops(self, block: int) -> None:
        self.descs.append(CopyOps(block))

    def differentiate(self, targets: Sequence, seeds: Sequence, wrt: Sequence[str]) -> list[Ref]:
        """Record a backward pass inside this block; returns one value per ``wrt`` (see ``Differentiate``)."""
        results = [Ref("grad") for _ in wrt]
        self.descs.append(Differentiate(list(targets), list(seeds), list(wrt), results))
        return results

    def returns(self, values: Sequence) -> list:
        """Set the block's results (symbolic zeros are filled in when it is built); returns them."""
        self.results = list(values)
        return self.results


def total(g: Builder, terms: Sequence) -> Any:
    """The sum of the terms that are not None (symbolic zeros), or None when every term is one."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    result = present[0]
    for term in present[1:]:
        result = g.add(result, term)
    return result


__all__ = ["Builder", "SubBlock", "Ref", "OpDesc", "RuleError", "CopyVars", "CopyOps", "Differentiate", "ReadsOf",
           "total"]
