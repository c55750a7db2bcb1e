"""A generator of valid inputs for every op type in the registry, for the invariant test beside it.

``CASES[op_type](g)`` builds one op of that type in a new program from values
drawn through ``g`` (a ``Draw``): the dtypes the schema accepts (one fixed by
the test), shapes of rank 0 to 4 with size-1 and zero-size dims, declared
shapes with -1 dims, and attrs that fit the shapes. It returns a ``Built``:
the program, the op, and the feed. Each builder produces only inputs its op
is meant to take, and says so where that is narrower than any array of an
accepted dtype (max of an empty axis has no value; split sections add up).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from gradgen.program import Program, layers, program_guard
from gradgen.program.dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES
from gradgen.program.ops.activation import UNARY_ATTRS
from gradgen.program.ops.elementwise import ELEMENTWISE_TYPES
from gradgen.program.ops.logic import COMPARISONS, LOGICAL
from gradgen.program.ops.reduction import REDUCE_TYPES

from .registry_builders import (
    Built, Draw, _argmax, _assign, _binary, _broadcast_to, _cast, _concat, _cumsum, _fill_constant,
    _filled_like, _from_output, _gather, _gather_grad, _like_x, _matmul, _mean, _mean_grad, _pad,
    _prod_others, _random, _reduce, _reduce_as, _reshape, _reshape_as, _scatter, _slice, _slice_grad, _split,
    _split_like, _squeeze, _stack, _sum, _take_along_axis, _take_along_axis_grad, _top_k, _transpose, _unary,
    _unsqueeze, _where, one_op,
)
from .registry_cases_23 import CASES_23
from .registry_cases_metrics import CASES_METRICS


def _mod(g: Draw) -> Built:
    """A divisor away from zero (an integer mod 0 is a run-time error), either sign; both quotient kinds."""
    (xs, ys), dtype = g.broadcast_pair(), g.dtype("X")
    y = g.array(ys, dtype, 1, 3)
    return one_op(g, {"X": g.array(xs, dtype), "Y": y if g.flag() else -y}, {"fmod": g.flag()})


def _one_hot(g: Draw) -> Built:
    depth = g.int(1, 4)
    return one_op(g, {"X": g.array(g.shape(max_rank=3), g.dtype("X"), 0, depth - 1)},
                  {"depth": depth, "dtype": g.dtype("dtype")})


def _softmax(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    axis = g.int(-len(shape), len(shape) - 1)
    shape[axis] = max(shape[axis], 1)  # a softmax over nothing has no max to subtract
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axis": axis})


def _labels(g: Draw, slot: str, axis_last: bool) -> Built:
    """cross_entropy (class axis last) and softmax_with_cross_entropy (any axis): soft or hard labels."""
    label_dtype = g.want.get("Label")
    soft = label_dtype in FLOAT_DTYPES if label_dtype else g.flag()
    dtype = label_dtype if soft and label_dtype else g.dtype(slot)
    shape = g.shape(min_rank=1)
    axis = len(shape) - 1 if axis_last else g.int(-len(shape), len(shape) - 1)
    shape[axis] = max(shape[axis], 1)
    x = g.array(shape, dtype, 0.5, 2) if axis_last else g.array(shape, dtype)
    if soft:
        label = g.array(shape, dtype, 0, 1)
    else:
        lshape = [1 if i == axis % len(shape) else d for i, d in enumerate(shape)]
        if g.flag():
            del lshape[axis]
        label = g.array(lshape, label_dtype or g.dtype("Label", INT_DTYPES), 0, shape[axis] - 1)
    attrs = {"soft_label": soft} if axis_last else {"soft_label": soft, "axis": axis}
    return one_op(g, {slot: x, "Label": label}, attrs)


def _sigmoid_ce(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("X")
    return one_op(g, {"X": g.array(shape, dtype), "Label": g.array(shape, dtype, 0, 1)})


def _dropout(g: Draw) -> Built:
    return one_op(g, {"X": g.array(g.shape(), g.dtype("X"))},
                  {"p": g(st.sampled_from([0.0, 0.5, 0.9])), "is_test": g.flag(), "seed": g.int(0, 9)})


def _lookup_table(g: Draw) -> Built:
    rows = g.int(1, 4)
    return one_op(g, {"W": g.array([rows, g.int(0, 3)], g.dtype("W")),
                      "Ids": g.array(g.shape(max_rank=3), g.dtype("Ids"), 0, rows - 1)})


def _batch_norm(g: Draw) -> Built:
    shape, dtype = g.shape(min_rank=2), g.dtype("X")
    c = [shape[1]]
    return one_op(g, {"X": g.array(shape, dtype), "Scale": g.array(c, dtype), "Bias": g.array(c, dtype),
                      "Mean": g.array(c, dtype), "Variance": g.array(c, dtype, 0.5, 2)},
                  {"is_test": g.flag(), "momentum": 0.9})


def _batch_norm_grad(g: Draw) -> Built:
    shape, dtype, is_test = g.shape(min_rank=2), g.dtype("X"), g.flag()
    c = [shape[1]]
    stats = {"Mean": g.array(c, dtype), "Variance": g.array(c, dtype, 0.5, 2)} if is_test else {}
    return one_op(g, {"X": g.array(shape, dtype), "Scale": g.array(c, dtype), **stats,
                      "Y@GRAD": g.array(shape, dtype)}, {"is_test": is_test})


def _layer_norm(g: Draw) -> Built:
    """layer_norm (X, Scale?, Bias?) or layer_norm_grad (X, Scale?, Y@GRAD), normalized dims known."""
    shape, dtype = g.shape(min_rank=1), g.dtype("X")
    begin = g.int(0, len(shape) - 1)
    affine = {s: g.array(shape[begin:], dtype) for s in ("Scale", "Bias") if g.flag()}
    if g.schema.type == "layer_norm_grad":
        affine.pop("Bias", None)
        affine["Y@GRAD"] = g.array(shape, dtype)
    attrs = {"begin_norm_axis": begin - len(shape) if g.flag() else begin}
    return one_op(g, {"X": g.array(shape, dtype), **affine}, attrs, known=tuple(affine))


def _recurrent(g: Draw) -> Built:
    """lstm/gru (optional biases, initial states, lengths), their grad ops (output gradients optional) and jvp
    ops (tangents optional): every param given to the grad and jvp ops, whose outputs follow the params."""
    from gradgen.program.ops.recurrent import GATES, OUTPUTS, PARAMS
    op = g.schema.type
    cell = op.split("_")[0]
    dtype = g.dtype("X")
    steps, batch, features, hidden = g.int(0, 3), g.int(0, 3), g.int(1, 3), g.int(1, 3)
    shapes = {"X": [steps, batch, features], "W": [GATES[cell] * hidden, features],
              "R": [GATES[cell] * hidden, hidden], "WB": [GATES[cell] * hidden], "RB": [GATES[cell] * hidden],
              "H0": [batch, hidden], "C0": [batch, hidden]}
    out_shapes = {"Y": [steps, batch, hidden], "H": [batch, hidden], "C": [batch, hidden]}
    every = op != cell
    ins = {p: g.array(shapes[p], dtype, -1, 1) for p in PARAMS[cell] if every or p in ("X", "W", "R") or g.flag()}
    if "SeqLens" in g.want or g.flag():
        ins["SeqLens"] = g.array([batch], g.dtype("SeqLens"), 0, steps)
    if every:
        ins.update({f"{o}@GRAD": g.array(out_shapes[o], dtype) for o in OUTPUTS[cell] if g.flag()})
    if op.endswith("_jvp"):
        ins.update({f"{p}@DOT": g.array(shapes[p], dtype) for p in PARAMS[cell] if g.flag()})
        ins.update({f"{o}@GRAD@DOT": g.array(out_shapes[o], dtype) for o in OUTPUTS[cell] if g.flag()})
    attrs = {"is_reverse": g.flag(), **({"linear_before_reset": g.flag()} if cell == "gru" else {})}
    return one_op(g, ins, attrs)


def _softmax_grad(g: Draw) -> Built:
    shape, dtype = g.shape(min_rank=1), g.dtype("Out")
    return one_op(g, {"Out": g.array(shape, dtype, 0, 1), "Out@GRAD": g.array(shape, dtype)},
                  {"axis": g.int(-len(shape), len(shape) - 1)})


# -- learning-rate schedules ----------------------------------------------------------------------------------
def _increment(g: Draw) -> Built:
    dtype = g.dtype("X")
    step = g.int(-2, 3) if dtype in INT_DTYPES else g(st.sampled_from([1.0, 0.5, -2.0]))
    return one_op(g, {"X": g.array(g(st.sampled_from([[], [1]])), dtype, -5, 5)}, {"step": step}, known=("X",))


def _step(g: Draw) -> np.ndarray:
    return g.array(g(st.sampled_from([[], [1]])), g.dtype("Step"), 0, 12)


def _schedule(g: Draw) -> Built:
    attrs: dict[str, Any] = {"dtype": g.dtype("dtype")}
    if g.schema.type == "piecewise_decay":
        attrs.update(boundaries=[2, 5, 9][:g.int(0, 3)])
        attrs.update(values=[0.5 ** k for k in range(len(attrs["boundaries"]) + 1)])
    elif g.schema.type == "exponential_decay":
        attrs.update(learning_rate=0.1, decay_steps=g.int(1, 4), decay_rate=0.5, staircase=g.flag())
    else:
        attrs.update(learning_rate=0.1, step_each_epoch=g.int(1, 4), epochs=g.int(1, 4))
    return one_op(g, {"Step": _step(g)}, attrs, known=("Step",))


def _warmup(g: Draw) -> Built:
    lr = g.array(g(st.sampled_from([[], [1]])), g.dtype("LearningRate"), 0, 1)
    return one_op(g, {"Step": _step(g), "LearningRate": lr},
                  {"warmup_steps": g.int(1, 8), "start_lr": 0.0, "end_lr": 0.25}, known=("Step", "LearningRate"))


# -- collective (a world of one process) -----------------------------------------------------------------------
def _bucket(g: Draw, dtype: str) -> list[np.ndarray]:
    return [g.array(g.shape(), dtype) for _ in range(g.int(1, 3))]


def _allreduce_start(g: Draw) -> Built:
    return one_op(g, {"X": _bucket(g, g.dtype("X"))}, known=("X",))


def _allreduce_wait(g: Draw) -> Built:
    """The wait needs the buffer its start op left in flight: both ops, the wait last."""
    dtype = g.dtype("Buffer")
    xs = _bucket(g, dtype)
    main = Program()
    block = main.global_block()
    names = [f"x_{k}" for k in range(len(xs))]
    for name, x in zip(names, xs):
        block.create_var(name, list(x.shape), dtype)
    block.append_op("allreduce_start", {"X": names}, {"Out": ["buffer"]})
    op = block.append_op("allreduce_wait", {"Buffer": ["buffer"], "X": names}, {"Out": [f"out_{n}" for n in names]},
                         {"average": dtype in FLOAT_DTYPES and g.flag()})
    return Built(main, op, dict(zip(names, xs)))


def _broadcast(g: Draw) -> Built:
    xs = _bucket(g, g.dtype("X"))
    return one_op(g, {"X": xs}, {"root": 0}, {"Out": len(xs)})


# -- optimizers -------------------------------------------------------------------------------------------------
def _update(g: Draw) -> Built:
    op, shape, dtype = g.schema.type, g.shape(), g.dtype("Param")
    lr = g.array(g(st.sampled_from([[], [1]])), dtype, 0.5, 1)
    ins = {"Param": g.array(shape, dtype), "Grad": g.array(shape, dtype), "LearningRate": lr}
    if op == "momentum":
        ins["Velocity"] = g.array(shape, dtype)
    if op in ("adam", "adamw", "lamb"):
        ins.update(Moment1=g.array(shape, dtype), Moment2=g.array(shape, dtype, 0, 2),
                   Beta1Pow=g.array([], dtype, 0.5, 0.5), Beta2Pow=g.array([], dtype, 0.5, 0.5))
    if op == "rmsprop":  # the mean square stays above the mean gradient's square, as running means keep it
        ins.update(MeanSquare=g.array(shape, dtype, 2, 3), MeanGrad=g.array(shape, dtype, -1, 1),
                   Moment=g.array(shape, dtype))
    if op == "adagrad":
        ins["Moment"] = g.array(shape, dtype, 0, 2)
    attrs = {"momentum": {"use_nesterov": g.flag()}, "rmsprop": {"centered": g.flag(), "momentum": 0.5}}
    return one_op(g, ins, attrs.get(op, {}), known=tuple(ins))


def _norms(g: Draw) -> Built:
    xs = [g.array(g.shape(), g.dtype("X"))]  # the rest of any float dtype: the schema does not ask for one
    xs += [g.array(g.shape(), g(st.sampled_from(FLOAT_DTYPES))) for _ in range(g.int(0, 2))]
    attrs = {"max_norm": 1.0} if g.schema.type == "clip_by_global_norm" else {}
    return one_op(g, {"X": xs}, attrs, {"Out": len(xs)} if attrs else None)


# -- conv and pooling -------------------------------------------------------------------------------------------
def _conv_parts(g: Draw):
    groups = g.int(1, 2)
    n, cin, cout = g.int(0, 2), g.int(1, 2), groups * g.int(1, 2)
    kh, kw, s, p, d = g.int(1, 2), g.int(1, 2), g.int(1, 2), g.int(0, 1), g.int(1, 2)
    h, w = d * (kh - 1) + 1 + g.int(0, 2), d * (kw - 1) + 1 + g.int(0, 2)
    attrs = {"strides": [s, s], "paddings": [p, p], "dilations": [d, d], "groups": groups}
    out = [n, cout, (h + 2 * p - d * (kh - 1) - 1) // s + 1, (w + 2 * p - d * (kw - 1) - 1) // s + 1]
    return [n, cin * groups, h, w], [cout, cin, kh, kw], out, attrs


def _conv2d(g: Draw) -> Built:
    x, f, out, attrs = _conv_parts(g)
    dtype = g.dtype("Filter" if g.schema.type == "conv2d_input_grad" else "Input")  # the slot the others follow
    ins = {"Input": g.array(x, dtype), "Filter": g.array(f, dtype)}
    if g.schema.type != "conv2d":
        ins["Output@GRAD"] = g.array(out, dtype)
        ins = {s.name: ins[s.name] for s in g.schema.inputs}
    return one_op(g, ins, attrs, known=("Filter",))


def _pool_parts(g: Draw):
    k, s = g.int(1, 3), g.int(1, 2)
    p = g.int(0, k - 1)
    h, w = k - 2 * p + g.int(0, 2), k - 2 * p + g.int(0, 2)
    x = [g.int(0, 2), g.int(0, 2), max(h, 1), max(w, 1)]
    out = x[:2] + [(x[2] + 2 * p - k) // s + 1, (x[3] + 2 * p - k) // s + 1]
    attrs = {"pooling_type": g(st.sampled_from(["max", "avg"])), "ksize": [k, k], "strides": [s, s],
             "paddings": [p, p]}
    return x, out, attrs


def _pool(g: Draw) -> Built:
    x, out, attrs = _pool_parts(g)
    dtype = g.dtype("X")
    ins = {"X": g.array(x, dtype)}
    if g.schema.type == "pool2d_grad":
        ins["Out@GRAD"] = g.array(out, dtype)
    if g.schema.type == "pool2d_select":
        attrs["pooling_type"] = "max"
        ins["D"] = g.array(x, dtype)
    return one_op(g, ins, attrs, known=("X", "D"))


def _conv2d_transpose(g: Draw) -> Built:
    groups, dtype = g.int(1, 2), g.dtype("Input")
    cin, cout = groups * g.int(1, 2), g.int(1, 2)
    s, d, k = g.int(1, 2), g.int(1, 2), g.int(1, 2)
    x = [g.int(0, 2), cin, g.int(1, 3), g.int(1, 3)]
    p = int(g.flag() and (min(x[2:]) - 1) * s + d * (k - 1) > 1)  # a padding of 1 must leave some output
    attrs = {"strides": [s, s], "paddings": [p, p], "dilations": [d, d], "groups": groups,
             "output_padding": [g.int(0, s - 1)] * 2}
    return one_op(g, {"Input": g.array(x, dtype), "Filter": g.array([cin, cout, k, k], dtype)}, attrs,
                  known=("Filter",))


# -- control flow -----------------------------------------------------------------------------------------------
def _cond(g: Draw) -> Built:
    main = Program()
    x = g.array(g.shape(), g.dtype("Input"))
    pred = g.array(g(st.sampled_from([[], [1]])), g.dtype("Cond"))
    with program_guard(main, Program()):
        xv, pv = layers.data("x", list(x.shape), x.dtype.name), layers.data("pred", list(pred.shape), "bool")
        layers.cond(pv, lambda: layers.assign(xv), lambda: layers.assign(layers.assign(xv)))
    return Built(main, main.global_block().ops[-1], {"x": x, "pred": pred})


def _while(g: Draw) -> Built:
    main = Program()
    x, steps = g.array(g.shape(), g.dtype("X", DTYPES) if "Input" not in g.want else g.want["Input"]), g.int(0, 3)
    with program_guard(main, Program()):  # the body reads x from outside (Input) and carries it (X)
        xv = layers.data("x", list(x.shape), x.dtype.name)
        limit = layers.fill_constant([], "int64", steps)
        layers.while_loop(lambda t, v: layers.less_than(t, limit), lambda t, v: [t + 1, layers.assign(xv)],
                          [layers.fill_constant([], "int64", 0), xv])
    return Built(main, main.global_block().ops[-1], {"x": x})


def _custom_gradient(g: Draw) -> Built:
    """A custom_gradient whose forward body reads its X and an outer var (Input), and whose gradient is none."""
    main = Program()
    x, outer = g.array(g.shape(), g.dtype("X")), g.array(g.shape(), g.dtype("Input"))
    with program_guard(main, Program()):
        xv = layers.data("x", list(x.shape), x.dtype.name)
        ov = layers.data("outer", list(outer.shape), outer.dtype.name)
        layers.custom_gradient(lambda v: [layers.assign(v), layers.assign(ov)], lambda ins, outs, douts: [None])(xv)
    return Built(main, main.global_block().ops[-1], {"x": x, "outer": outer})


def _call(g: Draw) -> Built:
    """A call of a custom_gradient's forward body: the block as a function, run on its own."""
    built = _custom_gradient(g)
    body, block = built.op, built.program.global_block()
    op = block.append_op("call", {"X": body.input("X"), "Input": body.input("Input")},
                         {"Out": [f"out_{k}" for k in range(len(body.attr("forward_outs")))]},
                         {"block": body.attr("forward_block"), "params": body.attr("forward_params"),
                          "outs": body.attr("forward_outs")})
    return Built(built.program, op, built.feed)


CASES: dict[str, Callable[[Draw], Built]] = {
    **{t: _unary for t in UNARY_ATTRS},
    **{t: _from_output for t in ("relu_grad", "tanh_grad", "sigmoid_grad")},
    **{t: _like_x for t in ("leaky_relu_grad", "clip_grad", "gelu_grad", "elu_grad")},
    **{t: _binary for t in ELEMENTWISE_TYPES + COMPARISONS + LOGICAL}, "logical_not": _unary,
    "elementwise_mod": _mod,
    **{t: _reduce for t in REDUCE_TYPES + ("reduce_prod", "logsumexp")},
    **{t: _conv2d for t in ("conv2d", "conv2d_input_grad", "conv2d_filter_grad")},
    **{t: _pool for t in ("pool2d", "pool2d_grad", "pool2d_select")},
    **{t: _update for t in ("sgd", "momentum", "adam", "adamw", "lamb", "rmsprop", "adagrad")},
    **{t: _norms for t in ("global_norm", "clip_by_global_norm")},
    **{t: _random for t in ("uniform_random", "gaussian_random")},
    **{t: _filled_like for t in ("fill_any_like", "fill_zeros_like")},
    **{t: _softmax for t in ("softmax", "log_softmax")},
    "where": _where, "matmul": _matmul, "mean": _mean, "reduce_mean_grad": _mean_grad, "argmax": _argmax,
    "fill_constant": _fill_constant, "assign": _assign, "cast": _cast, "sum": _sum, "reduce_as": _reduce_as,
    "broadcast_to": _broadcast_to, "reshape": _reshape, "transpose": _transpose, "concat": _concat, "split": _split,
    "slice": _slice, "slice_grad": _slice_grad, "squeeze": _squeeze, "unsqueeze": _unsqueeze, "stack": _stack,
    "gather": _gather, "gather_grad": _gather_grad, "reshape_as": _reshape_as, "split_like": _split_like,
    "one_hot": _one_hot, "cross_entropy": lambda g: _labels(g, "X", True),
    "softmax_with_cross_entropy": lambda g: _labels(g, "Logits", False),
    "sigmoid_cross_entropy_with_logits": _sigmoid_ce,
    "dropout": _dropout, "lookup_table": _lookup_table, "batch_norm": _batch_norm,
    "batch_norm_grad": _batch_norm_grad, "layer_norm": _layer_norm, "layer_norm_grad": _layer_norm,
    "softmax_grad": _softmax_grad, "cond": _cond, "while": _while,
    "prod_others": _prod_others, "argmin": _argmax, "pad": _pad, "cumsum": _cumsum,
    "conv2d_transpose": _conv2d_transpose,
    **{t: _scatter for t in ("scatter", "scatter_add")}, "take_along_axis": _take_along_axis,
    "take_along_axis_grad": _take_along_axis_grad, "top_k": _top_k,
    "increment": _increment, **{t: _schedule for t in ("piecewise_decay", "exponential_decay", "cosine_decay")},
    "linear_lr_warmup": _warmup, "allreduce_start": _allreduce_start, "allreduce_wait": _allreduce_wait,
    "broadcast": _broadcast, "custom_gradient": _custom_gradient, "call": _call,
    **CASES_23, **CASES_METRICS,
    **{f"{c}{k}": _recurrent for c in ("lstm", "gru") for k in ("", "_grad", "_jvp")},
}
"""op type -> the builder of one valid case of it."""


__all__ = ["Built", "Draw", "one_op", "CASES"]
