"""What a grad maker sees during the backward pass, and how the pass picks fresh names."""
from __future__ import annotations

from typing import Any

from gradgen.grad_makers import RuleError
from gradgen.program.dtypes import is_float
from gradgen.program.schema import TensorType


def _first(slots: dict[str, list[str]], slot: str, kind: str) -> str:
    """The one var of ``slot`` (a rule reading a slot the op does not fill is a RuleError)."""
    names = slots.get(slot)
    if not names:
        raise RuleError(f"the rule reads {kind} slot '{slot}', which holds no var")
    return names[0]


class NameAllocator:
    """Hands out names no var of the program and no earlier call has, so repeated passes never collide."""

    def __init__(self, block):
        self.program = block.program
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.used or self.program.has_var_anywhere(name):
            k += 1
            name = f"{base}@{k}"
        self.used.add(name)
        return name


class MakerContext:
    """The ``GradContext`` for one forward op: its slots, attrs and types, and its output gradients.

    ``grad`` finalizes an output's gradient when first asked (summing partial
    gradients, or zero-filling one nothing produced). ``grads_or_none`` does
    not zero-fill; the names it hands out may be read by gradient sub-blocks
    before the pass appends the ops that make them, so it remembers them
    (``pending``) for the pass to declare. ``var_type`` answers for vars of
    the forward program only.
    """

    def __init__(self, backward_pass, fwd, in_nodes: dict, out_nodes: dict, on_path: set):
        self._pass = backward_pass
        self._fwd = fwd
        self._in = in_nodes
        self._out = out_nodes
        self._on_path = on_path
        self.pending: dict[str, str] = {}  # gradient name -> the output it is the gradient of
        # Temporaries are named after the op's first output, without an extra slot's ".slot" suffix.
        self._label = (fwd.output_arg_names or [fwd.type])[0].split(".")[0]

    # -- the forward op ----------------------------------------------------------
    @property
    def type(self) -> str:
        return self._fwd.type

    @property
    def attrs(self) -> dict[str, Any]:
        return self._fwd.attrs

    def attr(self, name: str) -> Any:
        return self._fwd.attrs[name]

    def input(self, slot: str) -> str:
        return _first(self._fwd.inputs, slot, "input")

    def inputs(self, slot: str) -> list[str]:
        return self._fwd.inputs.get(slot, [])

    def input_slots(self) -> dict[str, list[str]]:
        return self._fwd.inputs

    def output(self, slot: str) -> str:
        return _first(self._fwd.outputs, slot, "output")

    def outputs(self, slot: str) -> list[str]:
        return self._fwd.outputs.get(slot, [])

    def var_type(self, name: str) -> TensorType:
        var = self._fwd.block.var(name)
        return TensorType(var.shape, var.dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._fwd.block.var(name).shape

    def dtype(self, name: str) -> str:
        return self._fwd.block.var(name).dtype

    # -- gradients -----------------------------------------------------------------
    def has_grad(self, slot: str, i: int = 0) -> bool:
        names = self._fwd.outputs.get(slot, [])
        return i < len(names) and bool(self._pass.contributions.get(self._out[names[i]]))

    def grad(self, slot: str) -> str:
        names = self._fwd.outputs.get(slot)
        name = names[0] if names else self.output(slot)  # output() raises the error
        g = self._pass.finalize(self._out[name], self._fwd)
        return g if g is not None else self._pass.zeros_like(name, self._fwd)

    def grads(self, slot: str) -> list[str]:
        grads = []
        for name in self.outputs(slot):
            g = self._pass.finalize(self._out[name], self._fwd)
            grads.append(g if g is not None else self._pass.zeros_like(name, self._fwd))
        return grads

    def grads_or_none(self, slot: str) -> list[str | None]:
        """Each output's gradient name, or None where nothing produced one (no zero fill)."""
        grads = []
        for name in self.outputs(slot):
            g = self._pass.finalize(self._out[name], self._fwd) if name in self._out else None
            if g is not None:
                self.pending[g] = name
            grads.append(g)
        return grads

    def wanted(self, slot: str) -> list[bool]:
        """For each var of input ``slot``, whether the pass needs its gradient."""
        block, on_path = self._fwd.block, self._on_path
        return [self._in[n] in on_path and is_float(block.var(n).dtype) for n in self.inputs(slot)]

    def results(self, grads: dict) -> list[tuple[str, Any]]:
        """``(partial-gradient name, value)`` for each wanted input the maker gave a gradient."""
        pairs = []
        inputs = self._fwd.inputs
        for slot, values in grads.items():
            names = inputs.get(slot)
            if names is None:
                raise RuleError(f"the rule returns a gradient for input slot '{slot}', which the op does not have")
            if type(values) is not list:
                values = [values]
            if len(values) != len(names):
                raise RuleError(f"the rule returns {len(values)} gradient(s) for input slot '{slot}', which holds "
                                f"{len(names)} var(s)")
            for name, value in zip(names, values):
                if value is None:
                    continue
                node = self._in[name]
                if node in self._on_path and is_float(self._fwd.block.var(name).dtype):
                    pairs.append((self._pass.contribution(node), value))
        return pairs

    def tmp(self, prefix: str) -> str:
        return self._pass.names.fresh(f"{self._label}@GRAD@{prefix}")
