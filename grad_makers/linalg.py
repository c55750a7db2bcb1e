"""matmul's gradient is two matmuls (one per input), with batch-broadcast dims summed back."""
from __future__ import annotations

from .base import grad_maker
from .families import summed_back

# For out = op_x(X) @ op_y(Y), where op_* transposes when the attr says so:
# (transpose_x, transpose_y) -> for each input, (A, B, transpose_a, transpose_b) of the product giving it.
_RULES = {
    (False, False): {"X": ("dout", "y", False, True), "Y": ("x", "dout", True, False)},
    (False, True): {"X": ("dout", "y", False, False), "Y": ("dout", "x", True, False)},
    (True, False): {"X": ("y", "dout", False, True), "Y": ("x", "dout", False, False)},
    (True, True): {"X": ("y", "dout", True, True), "Y": ("dout", "x", True, True)},
}


@grad_maker("matmul", emits=("matmul", "reduce_as"))
def matmul_grad(g, op):
    """Each product has the broadcast batch dims of out and the matrix dims of its input."""
    v = {"x": op.input("X"), "y": op.input("Y"), "dout": op.grad("Out")}
    rules, batch = _RULES[(op.attr("transpose_x"), op.attr("transpose_y"))], op.shape(op.output("Out"))[:-2]
    grads = {}
    for slot, like, other in (("X", v["x"], v["y"]), ("Y", v["y"], v["x"])):
        a, b, ta, tb = rules[slot]
        # Only the batch dims broadcast: the other input's matrix dims count as 1 here.
        met = () if other == like else (op.shape(other)[:-2] + (1, 1),)
        grads[slot] = summed_back(g, op, g.matmul(v[a], v[b], ta, tb), like, batch + op.shape(like)[-2:], met)
    return grads


__all__ = ["matmul_grad"]
