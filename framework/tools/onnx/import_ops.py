"""ONNX op type -> the function that translates one node into gradgen ops.

Each function gets a ``NodeContext`` (``importer.py``): ``ctx.x(k)`` is input k as a gradgen var,
``ctx.const(k)`` its value when it must be known at import time, ``ctx.out`` appends the op that
computes an output. A node gradgen cannot express raises ``NotImportable`` with the reason.
"""
from __future__ import annotations

import numpy as np

from gradgen.program.einsum_equation import EinsumError, parse_einsum
from gradgen.program.ops import activation, elementwise, logic, reduction

from .errors import NotImportable
from .import_checks import check_size, numpy_dtype, tensor_value

from .import_dims import of_shape, reshape_target
from .import_integer_rules import onnx_slice_range

__all__ = ["padded", "safe_sqrt", "is_nan", "is_inf", "BINARY", "UNARY", "COMPARE", "REDUCE"]

VARIADIC = frozenset({"Max", "Min", "Sum"})
"""ONNX operators that take any number of inputs: imported as chains (``import_table._variadic``)."""
BINARY = {o: t for t, o in elementwise.ONNX.items() if o not in VARIADIC}
"""ONNX's one-node arithmetic operators, from their ops' schemas (``OpSchema.onnx``)."""
UNARY = {**{o: t for t, o in activation.ONNX.items()}, "Identity": "assign"}
"""ONNX's one-node activations, from their ops' schemas, and Identity."""
COMPARE = {o: t for t, o in logic.ONNX.items()}
"""ONNX's comparisons and logical operators, from their ops' schemas."""
REDUCE = {o: t for t, o in reduction.ONNX.items()}
"""ONNX's Reduce nodes, from the reduction family (``program/ops/reduction.ONNX``)."""
FLOATS = ("float16", "float32", "float64")


def _floats_only(ctx, k: int = 0) -> None:
    if ctx.dtype(k) not in FLOATS:
        raise NotImportable(f"input {k} is {ctx.dtype(k)}; gradgen's op takes floats only")


def _binary(op_type):
    def translate(ctx):
        if op_type == "elementwise_div" and ctx.dtype(0) not in FLOATS:
            return _integer_div(ctx)
        y = ctx.x(1)
        if op_type == "elementwise_pow" and ctx.dtype(0) in FLOATS and ctx.dtype(1) != ctx.dtype(0):
            y = ctx.tmp("cast", {"X": y}, {"out_dtype": ctx.dtype(0)})  # ONNX's Pow takes any exponent type
        ctx.out(op_type, {"X": ctx.x(0), "Y": y})
    return translate


def _integer_div(ctx):
    """ONNX's integer Div truncates. w = x - fmod(x, y) is a multiple of y, and gradgen's true division of
    integers (in float64) gives w / y exactly while |w| <= 2**53; cast back to the operands' type.

    int64 beyond 2**53: float64 rounds w, so the quotient q0 may be off by a few (at most ~2**10, and 1 where
    |y| is large). The error is exact in int64: d = w - q0 * y = (q - q0) * y (wrapping arithmetic is exact
    modulo 2**64 and the true d is small), and d / y in float64 is within 1e-12 of the whole number q - q0,
    so rounding it gives the correction. q0 is cast from a float clipped below 2**63 (no cast overflows)."""
    x, y, dtype = ctx.x(0), ctx.x(1), ctx.dtype(0)
    whole = ctx.tmp("elementwise_sub", {"X": x, "Y": ctx.tmp("elementwise_mod", {"X": x, "Y": y}, {"fmod": True})})
    quotient = ctx.tmp("elementwise_div", {"X": whole, "Y": y})
    if dtype != "int64":
        return ctx.out("cast", {"X": quotient}, {"out_dtype": dtype})
    inside = ctx.tmp("clip", {"X": quotient}, {"min": -2.0 ** 63, "max": float(np.nextafter(2.0 ** 63, 0))})
    first = ctx.tmp("cast", {"X": inside}, {"out_dtype": dtype})
    missed = ctx.tmp("elementwise_sub", {"X": whole, "Y": ctx.tmp("elementwise_mul", {"X": first, "Y": y})})
    steps = ctx.tmp("elementwise_div", {"X": missed, "Y": y})  # a whole number, to within 1e-12
    rounded = ctx.tmp("elementwise_add", {"X": steps, "Y": ctx.tmp("scale", {"X": ctx.tmp("sign", {"X": steps})},
                                                                            {"scale": 0.5})})
    ctx.out("elementwise_add", {"X": first, "Y": ctx.tmp("cast", {"X": rounded}, {"out_dtype": dtype})})


def _variadic(op_type):
    def translate(ctx):
        acc = ctx.x(0)
        for k in range(1, ctx.n_inputs):
            last = k == ctx.n_inputs - 1
            acc = ctx.out(op_type, {"X": acc, "Y": ctx.x(k)}) if last else ctx.tmp(op_type, {"X": acc, "Y": ctx.x(k)})
        if ctx.n_inputs == 1:
            ctx.out("assign", {"X": acc})
    return translate


def _unary(op_type):
    """A one-node activation; on integers only the ops exact on them (Abs, Sign: ``activation.EXACT_ON_INTS``)
    and Relu, as max(x, 0)."""
    def translate(ctx):
        if op_type == "relu" and ctx.dtype(0) not in FLOATS:
            return ctx.out("elementwise_max", {"X": ctx.x(0), "Y": ctx.tmp("fill_zeros_like", {"X": ctx.x(0)})})
        if op_type != "assign" and op_type not in activation.EXACT_ON_INTS:
            _floats_only(ctx)
        ctx.out(op_type, {"X": ctx.x(0)})
    return translate


def is_nan(ctx):
    """IsNaN -> x != x (true for NaN alone, IEEE's rule, which no engine may rewrite away)."""
    _floats_only(ctx)
    ctx.out("not_equal", {"X": ctx.x(0), "Y": ctx.x(0)})


def is_inf(ctx):
    """IsInf -> x == inf, x == -inf, or either (``detect_positive`` / ``detect_negative``)."""
    _floats_only(ctx)
    x, signs = ctx.x(0), [s for s, attr in ((1, "detect_positive"), (-1, "detect_negative")) if ctx.attr(attr, 1)]
    hits = [ctx.tmp("equal", {"X": x, "Y": ctx.tmp("fill_any_like", {"X": x}, {"value": s * float("inf")})})
            for s in signs]
    if not hits:
        return ctx.out("fill_any_like", {"X": x}, {"value": 0, "dtype": "bool"})
    ctx.out("logical_or", {"X": hits[0], "Y": hits[1]}) if len(hits) == 2 else ctx.out("assign", {"X": hits[0]})


def _compare(op_type):
    def translate(ctx):
        dim = ctx.graph.lookup_symbol("dims", ctx.node.input[0])
        if dim is not None:  # Equal(one run-time dim, [1]): the test reduce_as's export makes
            if op_type != "equal" or not ctx.is_const(1) or ctx.const(1).reshape(-1).tolist() != [1]:
                raise NotImportable("a comparison of a run-time dim other than '== 1'")
            ctx.graph.unit_dims[ctx.node.output[0]] = dim
            return None
        ctx.out(op_type, {"X": ctx.x(0), "Y": ctx.x(1)})
    return translate


def mod(ctx):
    """Mod -> elementwise_mod: fmod=0 the floor remainder (the sign of the divisor), fmod=1 the truncated one."""
    ctx.out("elementwise_mod", {"X": ctx.x(0), "Y": ctx.x(1)}, {"fmod": bool(ctx.attr("fmod", 0))})


def floor(ctx):
    """Floor, which gradgen has no op for, exactly from its fraction r = fmod(x, 1) (C's fmod is exact): x - r
    truncates, one less where r < 0; x itself where r is 0 or NaN (whole numbers, -0.0, the infinities, NaN)."""
    _floats_only(ctx)
    x, dt = ctx.x(0), ctx.dtype(0)
    one, zero = (ctx.tmp("fill_constant", {}, {"shape": [], "dtype": dt, "value": v}) for v in (1.0, 0.0))
    r = ctx.tmp("elementwise_mod", {"X": x, "Y": one}, {"fmod": True})
    whole = ctx.tmp("elementwise_sub", {"X": x, "Y": r})
    up = ctx.tmp("where", {"Condition": ctx.tmp("greater_than", {"X": r, "Y": zero}), "X": whole, "Y": x})
    down = ctx.tmp("scale", {"X": whole}, {"bias": -1.0})
    ctx.out("where", {"Condition": ctx.tmp("less_than", {"X": r, "Y": zero}), "X": down, "Y": up})


def neg(ctx):
    """Neg -> scale by -1, which on integers is exact in their dtype (INT64_MIN stays itself, as it wraps)."""
    ctx.out("scale", {"X": ctx.x(0)}, {"scale": -1})


def elu(ctx):
    _floats_only(ctx)
    ctx.out("elu", {"X": ctx.x(0)}, {"alpha": float(ctx.attr("alpha", 1.0))})


def not_(ctx):
    ctx.out("logical_not", {"X": ctx.x(0)})


def leaky_relu(ctx):
    ctx.out("leaky_relu", {"X": ctx.x(0)}, {"alpha": float(ctx.attr("alpha", 0.01))})


def clip(ctx):
    if ctx.dtype(0) not in FLOATS:
        return _integer_clip(ctx)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min", -np.inf), ctx.attr("max", np.inf)
    else:
        lo = float(ctx.scalar(1)) if ctx.has(1) else -np.inf
        hi = float(ctx.scalar(2)) if ctx.has(2) else np.inf
    ctx.out("clip", {"X": ctx.x(0)}, {"min": float(lo), "max": float(hi)})


def _integer_clip(ctx):
    """Clip of integers (opset 12 on): max with the lower bound, min with the upper, each bound a tensor of x's
    type (clip's float attrs would round an int64 bound beyond 2**53)."""
    if ctx.opset < 12 or ctx.dtype(0) == "bool":
        raise NotImportable(f"Clip of {ctx.dtype(0)} at opset {ctx.opset}")
    x = ctx.x(0)
    for k, op_type in ((1, "elementwise_max"), (2, "elementwise_min")):
        if ctx.has(k):
            bound = ctx.x(k)
            if ctx.importer.block().var(bound).dtype != ctx.dtype(0):
                raise NotImportable(f"bound {k} of type {ctx.importer.block().var(bound).dtype}, x {ctx.dtype(0)}")
            x = ctx.tmp(op_type, {"X": x, "Y": bound})
    ctx.out("assign", {"X": x})


def _matmul_operand(ctx, k: int, axis: int) -> str:
    """A 1-D operand gets a unit dim (numpy's matmul rule), which ``_matmul_result`` removes again."""
    if ctx.rank(k) == 1:
        return ctx.tmp("unsqueeze", {"X": ctx.x(k)}, {"axes": [axis]})
    return ctx.x(k)


def matmul(ctx):
    x, y = _matmul_operand(ctx, 0, 0), _matmul_operand(ctx, 1, -1)
    drop = ([-2] if ctx.rank(0) == 1 else []) + ([-1] if ctx.rank(1) == 1 else [])
    if not drop:
        return ctx.out("matmul", {"X": x, "Y": y})
    ctx.out("squeeze", {"X": ctx.tmp("matmul", {"X": x, "Y": y})}, {"axes": drop})


def gemm(ctx):
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    ab = ctx.tmp("matmul", {"X": ctx.x(0), "Y": ctx.x(1)},
                 {"transpose_x": bool(ctx.attr("transA", 0)), "transpose_y": bool(ctx.attr("transB", 0))})
    if not ctx.has(2):
        return ctx.out("scale", {"X": ab}, {"scale": alpha})
    if alpha != 1.0:
        ab = ctx.tmp("scale", {"X": ab}, {"scale": alpha})
    c = ctx.x(2) if beta == 1.0 else ctx.tmp("scale", {"X": ctx.x(2)}, {"scale": beta})
    ctx.out("elementwise_add", {"X": ab, "Y": c})


def _softmax(op_type):
    def translate(ctx):
        _floats_only(ctx)
        rank = ctx.rank(0)
        if ctx.opset >= 13:
            return ctx.out(op_type, {"X": ctx.x(0)}, {"axis": int(ctx.attr("axis", -1))})
        # before opset 13: over all dims from ``axis`` on, as if flattened to 2-D there
        axis = int(ctx.attr("axis", 1))
        axis = axis + rank if axis < 0 else axis
        if axis == rank - 1:
            return ctx.out(op_type, {"X": ctx.x(0)}, {"axis": -1})
        shape = ctx.shape(0)
        if -1 in shape[axis:]:
            raise NotImportable(f"opset {ctx.opset} softmax over trailing dims of unknown size")
        flat = ctx.tmp("reshape", {"X": ctx.x(0)}, {"shape": list(shape[:axis]) + [-1] if -1 not in shape[:axis]
                                                     else [0] * axis + [-1]})
        ctx.out("reshape_as", {"X": ctx.tmp(op_type, {"X": flat}, {"axis": -1}), "Target": ctx.x(0)})
    return translate


def _axes(ctx, attr_since: int | None = None) -> list[int] | None:
    """Axes from the ``axes`` attr (older opsets) or the second input (newer); None when absent."""
    if "axes" in ctx.attrs:
        return [int(a) for a in ctx.attr("axes")]
    if ctx.has(1):
        return ctx.ints(1)
    return None


def _reduce(op_type, of: str | None = None, then=None):
    """A reduction, of input 0 or of ``of`` (a unary op: square for ReduceSumSquare, abs for ReduceL1) of it;
    ``then(ctx, reduced)`` appends the ops after it (ReduceL2's square root) and returns the result."""
    def translate(ctx):
        axes, keep = _axes(ctx), bool(ctx.attr("keepdims", 1))
        x = ctx.tmp(of, {"X": ctx.x(0)}) if of else ctx.x(0)
        if axes == [] or axes is None:
            if ctx.attr("noop_with_empty_axes", 0):  # each element alone: ``of`` and ``then`` still apply
                return ctx.out("assign", {"X": then(ctx, x) if then else x})
            axes = list(range(ctx.rank(0)))
        if ctx.var(0).dtype not in FLOATS and op_type in ("reduce_mean", "logsumexp"):
            raise NotImportable(f"{op_type} of integers")
        if ctx.rank(0):  # in range (a scalar's axis 0 is gradgen's "nothing to reduce")
            axes = [ctx.axis(int(a), ctx.rank(0)) for a in axes]
        if op_type in ("reduce_max", "reduce_min") and 0 in [ctx.shape(0)[a] for a in axes if ctx.rank(0)]:
            return _empty_extreme(ctx, x, axes, keep, op_type)
        attrs = {"dim": axes, "keep_dim": keep, "reduce_all": False}
        if then is None:
            return ctx.out(op_type, {"X": x}, attrs)
        ctx.out("assign", {"X": then(ctx, ctx.tmp(op_type, {"X": x}, attrs))})
    return translate


def _empty_extreme(ctx, x: str, axes: list[int], keep: bool, op_type: str) -> None:
    """ReduceMax/ReduceMin over an axis of size 0, which ONNX defines as -inf/+inf for floats (gradgen's ops refuse
    it at run time): those values in the reduced shape (that of the sum, 0 everywhere). Integers are refused:
    ONNX's value is the type's extreme, which the fill's float attr does not hold exactly."""
    if ctx.dtype(0) not in FLOATS:
        raise NotImportable(f"{op_type} of {ctx.dtype(0)} over an empty axis (ONNX: the type's extreme value)")
    total = ctx.tmp("reduce_sum", {"X": x}, {"dim": axes, "keep_dim": keep, "reduce_all": False})
    value = -np.inf if op_type == "reduce_max" else np.inf
    ctx.out("fill_any_like", {"X": total}, {"value": value, "dtype": ctx.dtype(0)})


def safe_sqrt(ctx, s: str) -> str:
    """sqrt(s) of a sum of squares, with gradient 0 where s is 0 (PyTorch's rule for a norm of zeros, which is
    the subgradient of least norm) rather than 0 * inf = NaN: where(s == 0, 0, sqrt(where(s == 0, 1, s))).
    Neither branch's gradient is ever inf, so the second derivative is finite too."""
    _floats_only(ctx)
    zero = ctx.tmp("equal", {"X": s, "Y": ctx.tmp("fill_zeros_like", {"X": s})})
    safe = ctx.tmp("where", {"Condition": zero, "X": ctx.tmp("fill_any_like", {"X": s}, {"value": 1.0}), "Y": s})
    return ctx.tmp("where", {"Condition": zero, "X": ctx.tmp("fill_zeros_like", {"X": s}),
                             "Y": ctx.tmp("sqrt", {"X": safe})})


def reshape(ctx):
    unit = ctx.graph.lookup_symbol("unit_dims", ctx.node.input[0])
    if unit is not None:
        ctx.graph.unit_dims[ctx.node.output[0]] = unit
        return None
    like = ctx.shape_source(1)
    if like is not None:
        return ctx.out("reshape_as", {"X": ctx.x(0), "Target": like})
    if not ctx.has(1):  # Reshape-1 (before opset 5) takes the shape as an attr
        return ctx.out("reshape", {"X": ctx.x(0)}, {"shape": ctx.attr_ints("shape")})
    vector = ctx.graph.lookup_vector(ctx.node.input[1])
    entries = vector.entries if vector is not None else ctx.ints(1)
    if ctx.attr("allowzero", 0) and any(isinstance(e, (int, np.integer)) and e == 0 for e in entries):
        raise NotImportable("allowzero=1 with a 0 in the shape (a zero-size dim; gradgen's 0 copies the input's dim)")
    if vector is not None:
        return ctx.out("reshape", {"X": ctx.x(0)}, {"shape": reshape_target(entries, ctx.x(0), ctx.rank(0))})
    ctx.out("reshape", {"X": ctx.x(0)}, {"shape": list(entries)})


def flatten(ctx):
    ctx.out("flatten", {"X": ctx.x(0)}, {"axis": int(ctx.attr("axis", 1))})


def trilu(ctx):
    """Trilu -> triu or tril. A diagonal k beyond +-2**40 keeps or drops the whole matrix as +-2**40 does (no dim
    is that long), so it is clamped there: the engines compute k + 1 or -k (INT64_MAX wrapped to a wrong mask
    on xla, INT64_MIN overflowed in numpy)."""
    k = int(ctx.scalar(1)) if ctx.has(1) else 0
    k = max(min(k, 2 ** 40), -2 ** 40)
    ctx.out("triu" if ctx.attr("upper", 1) else "tril", {"X": ctx.x(0)}, {"diagonal": k})


def transpose(ctx):
    perm = ctx.attr("perm")
    perm = list(range(ctx.rank(0)))[::-1] if perm is None else [int(p) for p in perm]
    ctx.out("transpose", {"X": ctx.x(0)}, {"perm": perm})


def concat(ctx):
    axis = int(ctx.attr("axis", 1))  # required since opset 4; Concat-1 made it optional with default 1
    ctx.out("concat", {"X": [ctx.x(k) for k in range(ctx.n_inputs) if ctx.has(k)]}, {"axis": axis})


def split(ctx):
    axis = ctx.axis(int(ctx.attr("axis", 0)), ctx.rank(0))
    n = len(ctx.node.output)
    if "split" in ctx.attrs:
        sizes = [int(s) for s in ctx.attr("split")]
    elif ctx.has(1):
        sizes = ctx.ints(1)
    else:
        size = ctx.shape(0)[axis]
        if size < 0:
            raise NotImportable("an even split of an axis of unknown size")
        chunk = -(-size // n)
        sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
    names = ctx.op("split", {"X": ctx.x(0)}, {"axis": axis, "sections": sizes},
                   names={"Out": list(ctx.node.output)})["Out"]
    for k, name in enumerate(names):
        ctx.bind(k, name)


def slice_(ctx):
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ctx.ints(1), ctx.ints(2)
        axes = ctx.ints(3) if ctx.has(3) else list(range(len(starts)))
        steps = ctx.ints(4) if ctx.has(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise NotImportable(f"{len(starts)} starts, {len(ends)} ends, {len(axes)} axes and {len(steps)} steps")
    clamp = lambda v: int(max(min(v, 2 ** 62), -2 ** 62))  # noqa: E731
    for a in axes:
        ctx.axis(int(a), ctx.rank(0))
    if all(s == 1 for s in steps):
        return ctx.out("slice", {"X": ctx.x(0)}, {"axes": [int(a) for a in axes],
                                                  "starts": [clamp(s) for s in starts],
                                                  "ends": [clamp(e) for e in ends]})
    # other steps: gather the picked indices, one axis at a time (the axis sizes must be known)
    x, rank = ctx.x(0), ctx.rank(0)
    for a, start, end, step in zip(axes, starts, ends, steps):
        a = ctx.axis(int(a), rank)
        size = ctx.shape(0)[a]
        if size < 0:
            raise NotImportable(f"a step of {step} along an axis of unknown size")
        if step == 0:
            raise NotImportable("a slice step of 0")
        picked = onnx_slice_range(start, end, step, size)  # a range: nothing made yet
        if len(picked) == 0:
            raise NotImportable("a strided slice that picks nothing")
        check_size([len(picked)], 8, "the index of a strided slice", ctx.importer.limits)
        picked = np.arange(picked.start, picked.stop, picked.step, dtype=np.int64)
        index = ctx.importer.constant_var(f"{ctx.node.output[0]}_index", picked)
        x = ctx.tmp("gather", {"X": x, "Index": index}, {"axis": a})
    ctx.out("assign", {"X": x})


def padded(ctx, x: str, axes: list[int], pads: list[int], value: int | float) -> str:
    """``x`` with constant padding (``pads`` as ONNX orders them: all begins, then all ends); negative pads crop."""
    rank = len(ctx.importer.block().var(x).shape)
    if len(pads) != 2 * len(axes):
        raise NotImportable(f"{len(pads)} pads for {len(axes)} axes (one begin and one end each)")
    widths = [0] * (2 * rank)
    for k, a in enumerate(axes):
        begin, end = pads[k], pads[k + len(axes)]
        if begin < 0 or end < 0:
            x = ctx.tmp("slice", {"X": x}, {"axes": [a], "starts": [max(-begin, 0)],
                                            "ends": [end if end < 0 else 2 ** 62]})
        widths[2 * a], widths[2 * a + 1] = max(begin, 0), max(end, 0)
    if not any(widths):
        return x
    if ctx.importer.block().var(x).dtype in FLOATS or float(value) == value:
        return ctx.tmp("pad", {"X": x}, {"paddings": widths, "pad_value": float(value)})
    # an integer no float holds (pad's value is a float attr): zeros padded, plus value times a 0/1 border
    border = ctx.tmp("pad", {"X": ctx.tmp("fill_zeros_like", {"X": x})}, {"paddings": widths, "pad_value": 1.0})
    fill = ctx.tmp("fill_any_like", {"X": border}, {"value": int(value)})
    return ctx.tmp("elementwise_add", {"X": ctx.tmp("pad", {"X": x}, {"paddings": widths, "pad_value": 0.0}),
                                       "Y": ctx.tmp("elementwise_mul", {"X": border, "Y": fill})})


def pad(ctx):
    if ctx.attr("mode", "constant") != "constant":
        raise NotImportable(f"mode={ctx.attr('mode')}")
    rank = ctx.rank(0)
    pads = [int(p) for p in ctx.attr("pads")] if ctx.opset < 11 else ctx.ints(1)
    value = float(ctx.attr("value", 0.0)) if ctx.opset < 11 else (ctx.scalar(2) if ctx.has(2) else 0.0)
    axes = [ctx.axis(a, rank) for a in ctx.ints(3)] if ctx.has(3) else list(range(rank))
    ctx.out("assign", {"X": padded(ctx, ctx.x(0), axes, pads, value)})


def einsum(ctx):
    """gradgen's einsum, which reads the equation as ONNX does (ellipsis, implicit result; no repeated letter
    within one term)."""
    equation = ctx.attr("equation")
    try:
        parse_einsum(equation, [ctx.rank(k) for k in range(ctx.n_inputs)])
    except EinsumError as e:
        raise NotImportable(f"equation '{equation}': {e}") from None
    ctx.out("einsum", {"Operands": [ctx.x(k) for k in range(ctx.n_inputs)]}, {"equation": equation})


def squeeze(ctx):
    axes = [ctx.axis(a, ctx.rank(0)) for a in _axes(ctx) or []]  # in range: a scalar has no axis 0 to squeeze
    ctx.out("squeeze", {"X": ctx.x(0)}, {"axes": axes})


def unsqueeze(ctx):
    axes = _axes(ctx)
    if axes is None:
        raise NotImportable("no axes")
    out_rank = ctx.rank(0) + len(axes)
    # ONNX axes index the output; inserting them in increasing order one at a time gives the same result
    ctx.out("unsqueeze", {"X": ctx.x(0)}, {"axes": sorted(ctx.axis(a, out_rank) for a in axes)})


def gather(ctx):
    like = ctx.shape_source(0)
    if like is not None and ctx.is_const(1) and ctx.const(1).size == 1:
        # one dim of a run-time shape (PyTorch's K = x.size(axis) for a full TopK): remembered like Shape's
        rank = len(ctx.importer.block().var(like).shape)
        ctx.graph.dims[ctx.node.output[0]] = (like, ctx.axis(int(ctx.scalar(1)), rank))
        return None
    ctx.out("gather", {"X": ctx.x(0), "Index": ctx.x(1)}, {"axis": int(ctx.attr("axis", 0))})


def cast(ctx):
    to = numpy_dtype(ctx.attr("to"))
    ctx.out("cast", {"X": ctx.x(0)}, {"out_dtype": to})


def where(ctx):
    ctx.out("where", {"Condition": ctx.x(0), "X": ctx.x(1), "Y": ctx.x(2)})


def _arg(op_type):
    return lambda ctx: _arg_translate(ctx, op_type)


def _arg_translate(ctx, op_type: str):
    attrs = {"axis": int(ctx.attr("axis", 0)), "keep_dim": bool(ctx.attr("keepdims", 1))}
    if not ctx.attr("select_last_index", 0):
        return ctx.out(op_type, {"X": ctx.x(0)}, attrs)
    # the last maximum: the first one of the reversed axis, counted from the end (the axis size must be known)
    axis = ctx.axis(attrs["axis"], ctx.rank(0))
    size = ctx.shape(0)[axis]
    if size < 0:
        raise NotImportable("select_last_index=1 along an axis of unknown size")
    check_size([size], 8, "the reversed index of select_last_index=1", ctx.importer.limits)
    backwards = ctx.importer.constant_var(f"{ctx.node.output[0]}_reversed", np.arange(size - 1, -1, -1, dtype=np.int64))
    first = ctx.tmp(op_type, {"X": ctx.tmp("gather", {"X": ctx.x(0), "Index": backwards}, {"axis": axis})}, attrs)
    last = ctx.tmp("fill_constant", {}, {"shape": [], "dtype": "int64", "value": size - 1})
    ctx.out("elementwise_sub", {"X": last, "Y": first})


def expand(ctx):
    like = ctx.shape_source(1)
    if like is not None:
        return ctx.out("broadcast_to", {"X": ctx.x(0), "ShapeLike": like})
    shape = ctx.ints(1)
    xs = ctx.shape(0)
    if -1 in xs:
        raise NotImportable("expanding an input of unknown shape")
    try:
        shape = np.broadcast_shapes(tuple(xs), tuple(shape))
    except ValueError:
        raise NotImportable(f"shape {shape} does not broadcast with the input's {list(xs)}") from None
    ctx.out("broadcast_to", {"X": ctx.x(0)}, {"shape": list(shape)})


def constant(ctx):
    if "value" not in ctx.attrs:
        others = {"value_float": np.float32, "value_int": np.int64, "value_floats": np.float32,
                  "value_ints": np.int64}
        for name, dtype in others.items():
            if name in ctx.attrs:
                return ctx.bind_const(0, np.asarray(ctx.attr(name), dtype))
        raise NotImportable(f"constant attrs {sorted(ctx.attrs)}")
    ctx.bind_const(0, tensor_value(ctx.attrs["value"], "value"))


def shape(ctx):
    """Shape -> a constant when every dim is known; else a shape vector (``import_dims``) whose entries are
    the known dims and the run-time ones as ``Dim``s, and, for the whole shape or one run-time dim, the var it
    is the shape of (``Expand``/``Reshape``/``ConstantOfShape`` of it, ``reduce_as``'s export)."""
    s = ctx.shape(0)
    # start and end count from the back when negative and are clamped to [0, rank], as a Slice's
    picked = onnx_slice_range(int(ctx.attr("start", 0)), int(ctx.attr("end", len(s))), 1, len(s))
    if -1 in s:
        ctx.graph.vectors[ctx.node.output[0]] = of_shape(s, ctx.x(0), picked.start, picked.stop)
        if len(picked) == 1 and s[picked.start] < 0:  # one run-time dim: see reduce_as_if
            ctx.graph.dims[ctx.node.output[0]] = (ctx.x(0), picked.start)
        if len(picked) == len(s):
            ctx.graph.shapes[ctx.node.output[0]] = ctx.x(0)
        return None
    ctx.bind_const(0, np.asarray(s, np.int64)[picked.start: picked.stop])


def _random_like(op_type: str, params: dict[str, tuple[str, float]], like: bool = True):
    """RandomUniformLike / RandomNormalLike -> uniform_random / gaussian_random with the input's shape (which
    must be known at import: gradgen's random ops take a static shape) and dtype (or the ``dtype`` attr);
    RandomUniform / RandomNormal (``like=False``) with the ``shape`` and ``dtype`` attrs (float by default). The
    ``seed`` attr seeds gradgen's generator (0 without one, so an import is reproducible). Each run draws a new
    sample (``redraw``), as ONNX means and ONNX Runtime does: an imported stochastic depth must not drop the
    same examples at every training step."""
    def translate(ctx):
        shape = ctx.shape(0) if like else [int(d) for d in ctx.attr("shape")]
        if any(d < 0 for d in shape):
            raise NotImportable(f"{'an input of ' if like else 'a '}shape {list(shape)} (gradgen's {op_type} needs a "
                                f"shape known now)")
        if "dtype" in ctx.attrs:
            dtype = numpy_dtype(ctx.attr("dtype"))
        else:
            dtype = ctx.dtype(0) if like else "float32"
        if dtype not in FLOATS:
            raise NotImportable(f"samples of type {dtype} (floats only)")
        seed = float(ctx.attr("seed", 0.0))
        if not np.isfinite(seed) or abs(seed) >= 2 ** 63:
            raise NotImportable(f"seed {seed}")
        attrs = {gradgen: float(ctx.attr(onnx_name, default)) for gradgen, (onnx_name, default) in params.items()}
        ctx.out(op_type, {}, {"shape": list(shape), "dtype": dtype, "seed": int(seed), "redraw": True, **attrs})
    return translate


random_uniform_like = _random_like("uniform_random", {"min": ("low", 0.0), "max": ("high", 1.0)})
random_normal_like = _random_like("gaussian_random", {"mean": ("mean", 0.0), "std": ("scale", 1.0)})
random_uniform = _random_like("uniform_random", {"min": ("low", 0.0), "max": ("high", 1.0)}, like=False)
random_normal = _random_like("gaussian_random", {"mean": ("mean", 0.0), "std": ("scale", 1.0)}, like=False)


def constant_of_shape(ctx):
    value = tensor_value(ctx.attrs["value"], "value") if "value" in ctx.attrs else np.zeros(1, np.float32)
    if value.size != 1:
        raise NotImportable(f"value must have one element, got {value.size}")
    like = ctx.shape_source(0)
    if like is not None:
        return ctx.out("fill_any_like", {"X": like}, {"value": value.reshape(-1)[0].item(), "dtype": value.dtype.name})
    dims = ctx.ints(0)
    check_size(dims, value.itemsize, "the filled tensor", ctx.importer.limits)
    ctx.bind_const(0, np.full(dims, value.reshape(-1)[0], dtype=value.dtype))
