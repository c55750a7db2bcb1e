"""matmul's gradient is two matmuls (one per input), with batch-broadcast dims summed back; its tangent, and
einsum's, is the product rule: one product per moving operand, that operand replaced by its tangent, summed.

Where the batch dims of X only ever meet a matrix or vector Y (``x[..., k] @ y``, X not transposed), Y's
gradient folds them instead: ``reshape(x, [-1, k])^T @ reshape(dout, [-1, n])`` is one 2-D product, where
per-sample products summed by ``reduce_as`` would be a batch of them and a sum.
"""
from __future__ import annotations

from gradgen.program.einsum_equation import Equation, parse_einsum, spell

from .base import grad_maker
from .families import summed_back
from .tangent_rules import tangent_rule, total

# For out = op_x(X) @ op_y(Y), where op_* transposes when the attr says so:
# (transpose_x, transpose_y) -> for each input, (A, B, transpose_a, transpose_b) of the product giving it.
_RULES = {
    (False, False): {"X": ("dout", "y", False, True), "Y": ("x", "dout", True, False)},
    (False, True): {"X": ("dout", "y", False, False), "Y": ("dout", "x", True, False)},
    (True, False): {"X": ("y", "dout", False, True), "Y": ("x", "dout", False, False)},
    (True, True): {"X": ("y", "dout", True, True), "Y": ("dout", "x", True, True)},
}


def folded_shapes(op) -> tuple[list[int], list[int]] | None:
    """The 2-D shapes of X and dout whose product gives Y's gradient at once, or None where it cannot fold.

    It folds when X has batch dims (rank >= 3) and is not transposed, Y is a matrix or a vector (so nothing
    broadcasts), and the sizes the folded shapes name are known and not 0 (a -1 fold of a 0-size array is
    ambiguous): X becomes [-1, k] and dout [-1, n] ([-1] when Y is a vector).
    """
    sx, sy = op.shape(op.input("X")), op.shape(op.input("Y"))
    if len(sx) < 3 or len(sy) > 2 or op.attr("transpose_x"):
        return None
    k_at = 0 if len(sy) == 1 or not op.attr("transpose_y") else 1
    k = sx[-1] if sx[-1] != -1 else sy[k_at]
    if len(sy) == 1:
        return ([-1, k], [-1]) if k > 0 else None
    n = sy[1 - k_at]
    return ([-1, k], [-1, n]) if k > 0 and n > 0 else None


@grad_maker("matmul", emits=("matmul", "reduce_as", "unsqueeze", "squeeze", "reshape"))
def matmul_grad(g, op):
    """Each product has the broadcast batch dims of out and the matrix dims of its input.

    A 1-D operand (numpy's rule) is made a row [1, k] (X) or a column [k, 1] (Y), dout gets the dim it lacks
    back, and the operand's gradient drops it again, summed over the batch dims. Y's gradient is one 2-D
    product over X's folded batch dims where ``folded_shapes`` allows.
    """
    x, y, out = op.input("X"), op.input("Y"), op.output("Out")
    x1, y1 = len(op.shape(x)) == 1, len(op.shape(y)) == 1
    v = {"x": g.unsqueeze(x, [0]) if x1 else x, "y": g.unsqueeze(y, [-1]) if y1 else y, "dout": op.grad("Out")}
    if y1:
        v["dout"] = g.unsqueeze(v["dout"], [-1])
    if x1:
        v["dout"] = g.unsqueeze(v["dout"], [-2])
    rules = _RULES[(op.attr("transpose_x") and not x1, op.attr("transpose_y") and not y1)]
    batch = op.shape(out)[:len(op.shape(out)) - (not x1) - (not y1)]
    fold = folded_shapes(op)
    grads = {}
    for slot, like, vector, other, other_vector in (("X", x, x1, y, y1), ("Y", y, y1, x, x1)):
        a, b, ta, tb = rules[slot]
        if slot == "Y" and fold is not None:  # rows of x and dout: [-1, k]^T @ [-1, n] is y's shape already
            rows = {"x": g.named("x_rows", g.reshape(x, fold[0])),
                    "dout": g.named("dout_rows", g.reshape(op.grad("Out"), fold[1]))}
            grads[slot] = g.matmul(rows[a], rows[b], ta, tb)
            continue
        full = g.matmul(v[a], v[b], ta, tb)
        if not vector:
            # Only the batch dims broadcast: the other input's matrix dims count as 1 here (a 1-D one has none).
            met = () if other_vector or other == like else (op.shape(other)[:-2] + (1, 1),)
            grads[slot] = summed_back(g, op, full, like, batch + op.shape(like)[-2:], met)
        elif slot == "X":  # [batch, 1, k]: every dim but the last is summed away
            grads[slot] = g.reduce_as(full, like)
        else:  # [batch, k, 1]
            column = g.squeeze(full, [-1])
            grads[slot] = g.reduce_as(column, like) if batch else column
    return grads


@tangent_rule("matmul", emits=("matmul", "elementwise_add"))
def matmul_tangent(g, op):
    """d(X @ Y) = dX @ Y + X @ dY, with the op's transposes."""
    x, y, tx, ty = op.input("X"), op.input("Y"), op.tangent("X"), op.tangent("Y")
    tr = (op.attr("transpose_x"), op.attr("transpose_y"))
    return {"Out": total(g, [tx and g.matmul(tx, y, *tr), ty and g.matmul(x, ty, *tr)])}


def _einsum_parts(op) -> tuple[Equation, list[str], list[tuple[int, ...]]]:
    xs = op.inputs("Operands")
    shapes = [op.shape(x) for x in xs]
    return parse_einsum(op.attr("equation"), [len(s) for s in shapes]), xs, shapes


def _others_give_full_size(size: int, others: list[int]) -> bool:
    """Whether the sizes ``others`` one letter has elsewhere provably broadcast to ``size``, the operand's own."""
    return size == 1 or any(d > 1 or (d == size and d >= 0) for d in others)


@grad_maker("einsum", emits=("einsum", "fill_any_like", "reduce_as"))
def einsum_grad(g, op):
    """d operand_k = einsum(dout, the other operands -> operand k's letters).

    A letter of operand k that the result and the other operands lack (summed away in k alone), or that they
    may only have at size 1, gets its size from ones shaped like operand k, one more einsum operand: dout is
    constant along it. Where operand k had size 1 against a larger size elsewhere (numpy broadcasting),
    reduce_as sums the gradient back.
    """
    eq, xs, shapes = _einsum_parts(op)
    dout, out_shape = op.grad("Out"), op.shape(op.output("Out"))
    grads = []
    for k, (x, term, shape) in enumerate(zip(xs, eq.terms, shapes)):
        if not op.wanted("Operands")[k]:
            grads.append(None)
            continue
        others = [(t, s) for j, (t, s) in enumerate(zip(eq.terms, shapes)) if j != k] + [(eq.out, out_shape)]
        elsewhere = {c: [s[t.index(c)] for t, s in others if c in t] for c in term}
        operands, terms = [dout] + [xs[j] for j in range(len(xs)) if j != k], [eq.out] + [t for t, _ in others[:-1]]
        if not all(c in eq.out or (elsewhere[c] and _others_give_full_size(d, elsewhere[c]))
                   for c, d in zip(term, shape)):
            operands, terms = operands + [g.op("fill_any_like", {"X": x}, {"value": 1.0})], terms + [term]
        grad = g.op("einsum", {"Operands": operands}, {"equation": spell(terms, term)})
        if any(d in (1, -1) and any(e != 1 for e in elsewhere[c]) for c, d in zip(term, shape)):
            grad = g.reduce_as(grad, x)
        grads.append(grad)
    return {"Operands": grads}


@tangent_rule("einsum", emits=("einsum", "elementwise_add"))
def einsum_tangent(g, op):
    """The product rule: one einsum per moving operand, that operand replaced by its tangent, summed."""
    xs, ts = op.inputs("Operands"), op.tangents("Operands")
    return {"Out": total(g, [t and g.op("einsum", {"Operands": xs[:k] + [t] + xs[k + 1:]}, op.attrs)
                             for k, t in enumerate(ts)])}


__all__ = ["folded_shapes", "matmul_grad", "matmul_tangent", "einsum_grad", "einsum_tangent"]
