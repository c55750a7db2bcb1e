"""matmul's gradient is two matmuls (one per wanted input), with batch-broadcast dims summed back."""
from __future__ import annotations

from .base import grad_maker, op, summed_back

# For out = op_x(X) @ op_y(Y), where op_* transposes when the attr says so:
# (transpose_x, transpose_y) -> for each input, (A, B, transpose_a, transpose_b) of the product giving it.
_RULES = {
    (False, False): {"X": ("dout", "y", False, True), "Y": ("x", "dout", True, False)},
    (False, True): {"X": ("dout", "y", False, False), "Y": ("dout", "x", True, False)},
    (True, False): {"X": ("y", "dout", False, True), "Y": ("x", "dout", False, False)},
    (True, True): {"X": ("y", "dout", True, True), "Y": ("dout", "x", True, True)},
}


@grad_maker("matmul", emits=("matmul", "reduce_as"))
def matmul_grad(fwd, ctx):
    names = {"x": ctx.input("X")[0], "y": ctx.input("Y")[0], "dout": ctx.output_grad("Out")[0]}
    rules = _RULES[(fwd.attr("transpose_x"), fwd.attr("transpose_y"))]
    out_shape = ctx.var_type(ctx.output("Out")[0]).shape
    descs = []
    for slot, like in (("X", names["x"]), ("Y", names["y"])):
        (grad,) = ctx.input_grad(slot)
        if grad is None:
            continue
        a, b, ta, tb = rules[slot]
        like_shape = ctx.var_type(like).shape
        # The product has the broadcast batch dims of out and the matrix dims of the input.
        full = tuple(out_shape[:-2]) + tuple(like_shape[-2:])
        build = lambda t, a=a, b=b, ta=ta, tb=tb: [  # noqa: E731
            op("matmul", {"X": names[a], "Y": names[b]}, {"Out": t}, transpose_x=ta, transpose_y=tb)]
        descs += summed_back(ctx, full, like, grad, build)
    return descs
