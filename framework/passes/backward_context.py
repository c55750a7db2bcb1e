"""What a grad maker sees during the backward pass, and how the pass picks fresh names."""
from __future__ import annotations

from typing import Any

from gradgen.program.dtypes import is_float
from gradgen.program.schema import TensorType


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
    """The ``GradContext`` for one forward op: its slots, attrs and types, and the gradient names.

    ``output_grad`` finalizes each output's gradient when first asked (summing
    partial gradients, or zero-filling one nothing produced); ``input_grad``
    hands out a fresh partial-gradient name per wanted input, None otherwise.
    ``var_type`` answers for vars of the forward program only.
    """

    def __init__(self, backward_pass, fwd, in_nodes: dict, out_nodes: dict, on_path: set):
        self._pass = backward_pass
        self._fwd = fwd
        self._in = in_nodes
        self._out = out_nodes
        self._on_path = on_path
        self._input_grads: dict[str, list] = {}
        # Temporaries are named after the op's first output, without an extra slot's ".slot" suffix.
        self._label = (fwd.output_arg_names or [fwd.type])[0].split(".")[0]

    def input(self, slot: str) -> list[str]:
        return self._fwd.input(slot)

    def output(self, slot: str) -> list[str]:
        return self._fwd.output(slot)

    def attr(self, name: str) -> Any:
        return self._fwd.attr(name)

    def var_type(self, name: str) -> TensorType:
        var = self._fwd.block.var(name)
        return TensorType(var.shape, var.dtype)

    def has_output_grad(self, slot: str, i: int = 0) -> bool:
        names = self._fwd.output(slot)
        return i < len(names) and bool(self._pass.contributions.get(self._out[names[i]]))

    def output_grad(self, slot: str) -> list[str]:
        grads = []
        for name in self._fwd.output(slot):
            g = self._pass.finalize(self._out[name], self._fwd)
            grads.append(g if g is not None else self._pass.zeros_like(name, self._fwd))
        return grads

    def output_grad_or_none(self, slot: str, declare: bool = False) -> list[str | None]:
        """Each output's gradient name, or None where nothing produced one (no zero fill).

        With ``declare``, each gradient var is declared in the forward op's
        block right away (typed like its output), so that a sub-block built
        now can read it before the pass appends the op that makes it.
        """
        block, grads = self._fwd.block, []
        for name in self._fwd.output(slot):
            g = self._pass.finalize(self._out[name], self._fwd) if name in self._out else None
            if g is not None and declare and not block.has_var(g):
                var = block.var(name)
                block.create_var(g, var.shape, var.dtype)
            grads.append(g)
        return grads

    def new_block(self):
        """A fresh sub-block whose parent is the forward op's block (for a gradient sub-block)."""
        return self._fwd.block.program.create_block(self._fwd.block.idx)

    def gradients(self, block, targets: list[str], target_grads: list[str], inputs: list[str]) -> list[str | None]:
        """Append to ``block`` the gradient of ``targets`` (seeded with ``target_grads``) in ``inputs``."""
        return self._pass.nested(block, targets, target_grads, inputs)

    def input_grad(self, slot: str) -> list[str | None]:
        if slot not in self._input_grads:
            grads = []
            for name in self._fwd.input(slot):
                node = self._in[name]
                wanted = node in self._on_path and is_float(self._fwd.block.var(name).dtype)
                grads.append(self._pass.contribution(node) if wanted else None)
            self._input_grads[slot] = grads
        return self._input_grads[slot]

    def tmp(self, prefix: str) -> str:
        return self._pass.names.fresh(f"{self._label}@GRAD@{prefix}")
