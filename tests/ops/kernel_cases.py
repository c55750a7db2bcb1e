"""Kernel cases for the ops of issue 14, each checked against a numpy computation written from the definition
(loops where numpy has no one-call equivalent), in float32 and float64, with int inputs where the op takes them."""
from __future__ import annotations

import itertools
import math

import numpy as np

from tests.framework.op_harness import Case

rng = np.random.default_rng(14)
FLOATS = ("float32", "float64")


def randn(shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def activation_cases():
    for dtype in FLOATS:
        for shape in [(5,), (2, 3, 4), (), (0, 3)]:
            yield Case("erf", {"X": randn(shape, dtype)}, lambda i: _erf(i["X"]))
            yield Case("silu", {"X": randn(shape, dtype)}, lambda i: i["X"] / (1.0 + np.exp(-i["X"].astype(float))))
            yield Case("elu", {"X": randn(shape, dtype)}, lambda i: np.where(
                i["X"] > 0, i["X"], 0.7 * (np.exp(i["X"].astype(float)) - 1)), {"alpha": 0.7})
            yield Case("elu_grad", {"X": randn(shape, dtype), "Out@GRAD": randn(shape, dtype)},
                       lambda i: {"X@GRAD": [np.where(i["X"] > 0, 1.0, 0.7 * np.exp(i["X"].astype(float)))
                                             * i["Out@GRAD"]]}, {"alpha": 0.7})


def _reduce_ref(fn, x, dim, keep):
    axes = tuple(range(x.ndim)) if not dim else tuple(d % x.ndim for d in dim)
    out = np.asarray(x, dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    for a in sorted(axes, reverse=True):
        out = np.apply_along_axis(fn, a, out) if out.shape[a] else np.full(out.shape[:a] + out.shape[a + 1:], fn([]))
        if keep:
            out = np.expand_dims(out, a)
    return out


def _product(v):
    p = 1
    for e in v:
        p = p * e
    return p


def _others_ref(x, dim):
    """For each element, the product of the others in its group, multiplied out one by one (no division)."""
    axes = tuple(range(x.ndim)) if not dim else tuple(sorted(d % x.ndim for d in dim))
    out = np.empty_like(x)
    for pos in np.ndindex(x.shape):
        group = [q for q in np.ndindex(x.shape) if all(q[a] == pos[a] for a in range(x.ndim) if a not in axes)]
        out[pos] = _product([x[q] for q in group if q != pos])
    return out


def reduction_cases():
    for dtype in FLOATS + ("int64",):
        for shape, dim, keep in [((3, 4), [1], False), ((2, 3, 4), [0, -1], True), ((2, 3), [], False),
                                 ((2, 0, 3), [1], False), ((1, 1), [0], True)]:
            x = rng.integers(-3, 4, shape).astype(dtype)
            x.flat[::3] = 0 if x.size else x.flat[::3]  # zeros, several per row
            yield Case("reduce_prod", {"X": x}, lambda i, d=dim, k=keep: _reduce_ref(_product, i["X"], d, k).astype(
                i["X"].dtype), {"dim": dim, "keep_dim": keep, "reduce_all": not dim})
            yield Case("prod_others", {"X": x}, lambda i, d=dim: _others_ref(i["X"], d), {"dim": dim,
                                                                                           "reduce_all": not dim})
    for dtype in FLOATS:
        for shape, dim, keep in [((3, 4), [1], False), ((2, 3, 4), [0, -1], True), ((2, 3), [], False),
                                 ((2, 0, 3), [1], False)]:
            x = randn(shape, dtype) * 30  # exp would overflow float32 without the shift
            yield Case("logsumexp", {"X": x}, lambda i, d=dim, k=keep: _reduce_ref(
                lambda v: max(v) + math.log(sum(math.exp(e - max(v)) for e in v)) if len(v) else -math.inf,
                i["X"], d, k), {"dim": dim, "keep_dim": keep, "reduce_all": not dim})
        x = np.array([[1.0, 1.0, 0.5], [3.0, -2.0, -2.0]], dtype)  # ties: the first index wins
        for axis, keep in [(0, False), (-1, True), (1, False)]:
            yield Case("argmin", {"X": x}, lambda i, a=axis, k=keep: (np.expand_dims if k else lambda v, _: v)(
                np.apply_along_axis(lambda r: int(np.flatnonzero(r == r.min())[0]), a, i["X"]), a).astype(np.int64),
                {"axis": axis, "keep_dim": keep})


def _cumsum_ref(x, axis, exclusive, reverse):
    moved = np.moveaxis(x, axis, 0)
    out = np.zeros_like(moved)
    n = moved.shape[0]
    for k in range(n):
        span = (range(k + 1, n) if exclusive else range(k, n)) if reverse else (range(k) if exclusive else range(k + 1))
        for j in span:
            out[k] += moved[j]
    return np.moveaxis(out, 0, axis)


def _pad_ref(x, pads, value):
    shape = [d + pads[2 * k] + pads[2 * k + 1] for k, d in enumerate(x.shape)]
    out = np.full(shape, value, x.dtype)
    out[tuple(slice(pads[2 * k], pads[2 * k] + d) for k, d in enumerate(x.shape))] = x
    return out


def manipulation_cases():
    for dtype in FLOATS + ("int32",):
        x = (randn((3, 4), "float64") * 5).astype(dtype)
        for axis, exclusive, reverse in itertools.product((0, -1), (False, True), (False, True)):
            yield Case("cumsum", {"X": x}, lambda i, a=axis, e=exclusive, r=reverse: _cumsum_ref(i["X"], a % 2, e, r),
                       {"axis": axis, "exclusive": exclusive, "reverse": reverse})
        yield Case("cumsum", {"X": x[:, :0]}, lambda i: i["X"], {"axis": 1}, label="empty")
        yield Case("pad", {"X": x[0, 0]}, lambda i: i["X"], {"paddings": []}, label="scalar")
        for pads, value in [([1, 0, 2, 3], 0.0), ([0, 0, 0, 0], 0.0), ([2, 2, 0, 1], -1.0)]:
            yield Case("pad", {"X": x}, lambda i, p=pads, v=value: _pad_ref(i["X"], p, v),
                       {"paddings": pads, "pad_value": value})
        y = (randn((5, 6, 2)) * 5).astype(dtype)
        for axes, starts, ends, strides in [([0], [0], [5], [2]), ([1, 0], [-1, 4], [-100, 0], [-2, -3]),
                                            ([2], [0], [2], [])]:
            def ref(i, axes=axes, starts=starts, ends=ends, strides=strides):
                out = i["X"]
                for a, s, e, st in zip(axes, starts, ends, strides or [1] * len(axes)):
                    out = np.take(out, list(range(out.shape[a]))[s:e:st], axis=a)
                return out
            yield Case("slice", {"X": y}, ref, {"axes": axes, "starts": starts, "ends": ends, "strides": strides},
                       label=f"strides{strides}")


def _scatter_ref(x, index, updates, axis, add):
    out = x.copy()
    for k, j in enumerate(index.ravel()):
        src = np.take(updates.reshape(x.shape[:axis] + (index.size,) + x.shape[axis + 1:]), k, axis=axis)
        dst = [slice(None)] * x.ndim
        dst[axis] = j
        out[tuple(dst)] = out[tuple(dst)] + src if add else src
    return out


def _take_grad_ref(x, index, dout, axis):
    out = np.zeros(x.shape, dout.dtype)
    for pos in np.ndindex(index.shape):
        target = list(pos)
        target[axis] = index[pos]
        out[tuple(target)] += dout[pos]
    return out


def _top_k_ref(x, k, axis, largest):
    moved = np.moveaxis(x, axis, -1)
    values, indices = np.zeros(moved.shape[:-1] + (k,), x.dtype), np.zeros(moved.shape[:-1] + (k,), np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        row = moved[pos]
        order = sorted(range(len(row)), key=lambda j: (-row[j] if largest else row[j], j))[:k]
        indices[pos], values[pos] = order, row[order]
    return {"Out": [np.moveaxis(values, -1, axis)], "Indices": [np.moveaxis(indices, -1, axis)]}


def indexing_cases():
    for dtype in FLOATS + ("int64",):
        x = (randn((4, 3)) * 5).astype(dtype)
        for axis, index in [(0, np.array([2, 0])), (1, np.array([[2], [0]])), (0, np.array([-1, 1, 0]))]:
            updates = (randn(np.take(x, index, axis=axis).shape) * 5).astype(dtype)
            yield Case("scatter", {"X": x, "Index": index, "Updates": updates},
                       lambda i, a=axis: _scatter_ref(i["X"], i["Index"], i["Updates"], a, False), {"axis": axis})
        for axis, index in [(0, np.array([2, 0, 2, 2])), (1, np.array([[1, 1], [0, 1]]))]:
            updates = (randn(np.take(x, index, axis=axis).shape) * 5).astype(dtype)
            yield Case("scatter_add", {"X": x, "Index": index, "Updates": updates},
                       lambda i, a=axis: _scatter_ref(i["X"], i["Index"], i["Updates"], a, True), {"axis": axis})
        index = np.array([[3, 0, 3], [1, 1, 2], [0, 0, 0], [2, 1, 0]])
        yield Case("take_along_axis", {"X": x, "Index": index[:, :1] % 3},
                   lambda i: np.array([[r[j[0]]] for r, j in zip(i["X"], i["Index"])], i["X"].dtype), {"axis": 1})
        ties = np.array([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2], [5, 4, 3, 2, 1]], dtype)
        for k, axis, largest in [(2, -1, True), (3, 1, False), (0, -1, True), (2, 0, True), (5, -1, False)]:
            yield Case("top_k", {"X": ties}, lambda i, k=k, a=axis, lg=largest: _top_k_ref(i["X"], k, a % 2, lg),
                       {"k": k, "axis": axis, "largest": largest}, label=f"k={k},axis={axis},largest={largest}")
    for dtype in FLOATS:
        x, index = randn((2, 4), dtype), np.array([[3, 0, 3], [1, 1, 2]])
        yield Case("take_along_axis_grad", {"X": x, "Index": index, "Out@GRAD": randn((2, 3), dtype)},
                   lambda i: {"X@GRAD": [_take_grad_ref(i["X"], i["Index"], i["Out@GRAD"], 1)]}, {"axis": 1})


def _conv_transpose_ref(x, w, stride, pad, dilation, groups, extra):
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    oh = (h - 1) * stride[0] - 2 * pad[0] + dilation[0] * (kh - 1) + 1 + extra[0]
    ow = (wd - 1) * stride[1] - 2 * pad[1] + dilation[1] * (kw - 1) + 1 + extra[1]
    out = np.zeros((n, cout_g * groups, oh, ow))
    cin_g = cin // groups
    for b, ci, i, j, co, ki, kj in itertools.product(range(n), range(cin), range(h), range(wd), range(cout_g),
                                                     range(kh), range(kw)):
        r, c = i * stride[0] - pad[0] + ki * dilation[0], j * stride[1] - pad[1] + kj * dilation[1]
        if 0 <= r < oh and 0 <= c < ow:
            out[b, (ci // cin_g) * cout_g + co, r, c] += x[b, ci, i, j] * w[ci, co, ki, kj]
    return out


def _pool_ref(x, kind, k, s, pads, exclusive, ceil_mode):
    pt, pb, pl, pr = (pads[0], pads[0], pads[1], pads[1]) if len(pads) == 2 else pads
    sizes = []
    for size, kk, ss, before, after in ((x.shape[2], k[0], s[0], pt, pb), (x.shape[3], k[1], s[1], pl, pr)):
        span = size + before + after - kk
        out = (math.ceil(span / ss) if ceil_mode else span // ss) + 1
        sizes.append(out - 1 if ceil_mode and (out - 1) * ss >= size + before else out)
    out = np.zeros(x.shape[:2] + tuple(sizes))
    for b, c, i, j in itertools.product(range(x.shape[0]), range(x.shape[1]), range(sizes[0]), range(sizes[1])):
        rows = [r for r in range(i * s[0] - pt, i * s[0] - pt + k[0]) if 0 <= r < x.shape[2]]
        cols = [q for q in range(j * s[1] - pl, j * s[1] - pl + k[1]) if 0 <= q < x.shape[3]]
        window = x[b, c][np.ix_(rows, cols)].astype(np.float64)
        if kind == "max":  # padding counts as -inf: a window over padding only never occurs
            out[b, c, i, j] = window.max()
        else:
            out[b, c, i, j] = window.sum() / (window.size if exclusive else k[0] * k[1])
    return out


POOLS = [("avg", [3, 3], [2, 2], [1, 0, 0, 1], False, True), ("avg", [3, 2], [2, 2], [1, 1], True, True),
         ("max", [3, 3], [2, 2], [1, 0, 0, 1], True, True), ("avg", [2, 2], [1, 2], [0, 1, 1, 0], False, False),
         ("max", [2, 3], [3, 2], [1, 0, 2, 1], True, False)]


def conv_cases():
    for dtype in FLOATS:
        for shape, wshape, stride, pad, dilation, groups, extra in [
                ((2, 3, 4, 5), (3, 2, 3, 3), [1, 1], [0, 0], [1, 1], 1, [0, 0]),
                ((1, 4, 3, 3), (4, 1, 3, 2), [2, 3], [1, 0], [1, 2], 2, [1, 2]),
                ((1, 2, 2, 3), (2, 3, 2, 2), [2, 2], [1, 1], [1, 1], 1, [0, 1])]:
            attrs = {"strides": stride, "paddings": pad, "dilations": dilation, "groups": groups,
                     "output_padding": extra}
            yield Case("conv2d_transpose", {"Input": randn(shape, dtype), "Filter": randn(wshape, dtype)},
                       lambda i, a=(stride, pad, dilation, groups, extra): {"Output": [_conv_transpose_ref(
                           i["Input"], i["Filter"], *a)]}, attrs, label=f"s{stride}p{pad}d{dilation}g{groups}o{extra}")
        x = randn((2, 2, 5, 6), dtype)
        for kind, k, s, pads, exclusive, ceil_mode in POOLS:
            attrs = {"pooling_type": kind, "ksize": k, "strides": s, "paddings": pads, "exclusive": exclusive,
                     "ceil_mode": ceil_mode}
            yield Case("pool2d", {"X": x}, lambda i, a=(kind, k, s, pads, exclusive, ceil_mode): _pool_ref(i["X"], *a),
                       attrs, label=f"{kind}{k}s{s}p{pads}excl={exclusive},ceil={ceil_mode}")


def linalg_cases():
    for dtype in FLOATS:
        for sx, sy, tx, ty in [((4,), (4,), False, False), ((4,), (4, 3), True, False), ((2, 3, 4), (4,), False, False),
                               ((4,), (2, 5, 4), False, True), ((3, 4), (3,), True, True),
                               ((0,), (0, 2), False, False)]:
            def ref(i, tx=tx, ty=ty):
                x, y = i["X"].astype(np.float64), i["Y"].astype(np.float64)
                x = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
                y = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
                if x.ndim == 1 and y.ndim == 1:
                    return np.asarray(sum(a * b for a, b in zip(x, y)))
                if x.ndim == 1:
                    return np.einsum("k,...kn->...n", x, y)
                return np.einsum("...mk,k->...m", x, y)
            yield Case("matmul", {"X": randn(sx, dtype), "Y": randn(sy, dtype)}, ref,
                       {"transpose_x": tx, "transpose_y": ty}, label=f"1-D tx={tx} ty={ty}")


NEW_OP_CASES = [*activation_cases(), *reduction_cases(), *manipulation_cases(), *indexing_cases(), *conv_cases(),
                *linalg_cases()]
"""Every op issue 14 added or extended, on several shapes and dtypes."""

__all__ = ["NEW_OP_CASES", "POOLS"]
