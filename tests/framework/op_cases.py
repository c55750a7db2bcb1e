"""Kernel test cases: every op on random inputs (several shapes, broadcasting, float32 and float64),
each with an independent numpy computation of what it must return."""
from __future__ import annotations

import math

import numpy as np
import scipy.special
from scipy.special import erf

from tests.framework.op_harness import Case
from tests.ops.kernel_cases import NEW_OP_CASES
from tests.ops.kernel_cases_23 import OPS23_CASES
from tests.ops.kernel_cases_metrics import METRIC_CASES

rng = np.random.default_rng(1234)
FLOATS = ("float32", "float64")


def randn(shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


def positive(shape, dtype="float64"):
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def away_from_zero(shape, dtype="float64"):
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def _sigmoid_ref(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


UNARY = {
    "relu": (randn, {}, lambda x: np.where(x > 0, x, 0)),
    "sigmoid": (randn, {}, _sigmoid_ref),
    "tanh": (randn, {}, lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1)),
    "exp": (randn, {}, lambda x: math.e ** x.astype(np.float64)),
    "log": (positive, {}, lambda x: np.log(x.astype(np.float64))),
    "sqrt": (positive, {}, lambda x: x.astype(np.float64) ** 0.5),
    "square": (randn, {}, lambda x: x * x),
    "abs": (randn, {}, lambda x: np.where(x < 0, -x, x)),
    "sin": (randn, {}, np.sin),
    "cos": (randn, {}, np.cos),
    "gelu": (randn, {}, lambda x: x * 0.5 * (1 + erf(x.astype(np.float64) / math.sqrt(2)))),
    "softplus": (randn, {}, lambda x: np.log(1 + np.exp(x.astype(np.float64)))),
    "reciprocal": (away_from_zero, {}, lambda x: 1.0 / x),
    "sign": (away_from_zero, {}, lambda x: np.where(x > 0, 1.0, -1.0)),
    "leaky_relu": (randn, {"alpha": 0.1}, lambda x: np.where(x > 0, x, 0.1 * x)),
    "scale": (randn, {"scale": 2.0, "bias": 0.5}, lambda x: 2.0 * x + 0.5),
    "clip": (randn, {"min": -0.5, "max": 0.5}, lambda x: np.minimum(np.maximum(x, -0.5), 0.5)),
    "pow": (positive, {"factor": 2.5}, lambda x: np.exp(2.5 * np.log(x.astype(np.float64)))),
}

ELEMENTWISE = {
    "elementwise_add": (randn, randn, lambda x, y: x + y),
    "elementwise_sub": (randn, randn, lambda x, y: x - y),
    "elementwise_mul": (randn, randn, lambda x, y: x * y),
    "elementwise_div": (randn, away_from_zero, lambda x, y: x / y),
    "elementwise_pow": (positive, randn, lambda x, y: np.exp(y * np.log(x))),
    "elementwise_max": (randn, randn, lambda x, y: np.where(x >= y, x, y)),
    "elementwise_min": (randn, randn, lambda x, y: np.where(x <= y, x, y)),
    "elementwise_mod": (randn, away_from_zero, lambda x, y: x - np.floor(x / y) * y),
}
BROADCAST_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 4), (3, 1))]


def unary_cases():
    for op, (make, attrs, ref) in UNARY.items():
        for dtype in FLOATS:
            for shape in [(5,), (2, 3, 4), ()]:
                yield Case(op, {"X": make(shape, dtype)}, lambda i, ref=ref: ref(i["X"]), attrs)


def elementwise_cases():
    for op, (mx, my, ref) in ELEMENTWISE.items():
        for dtype in FLOATS:
            for sx, sy in BROADCAST_SHAPES:
                yield Case(op, {"X": mx(sx, dtype), "Y": my(sy, dtype)}, lambda i, ref=ref: ref(i["X"], i["Y"]))


def _matmul_ref(x, y, tx=False, ty=False):
    x = np.swapaxes(x, -1, -2) if tx else x
    y = np.swapaxes(y, -1, -2) if ty else y
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x = np.broadcast_to(x, batch + x.shape[-2:])
    y = np.broadcast_to(y, batch + y.shape[-2:])
    return np.einsum("...ij,...jk->...ik", x, y)


def linalg_cases():
    for dtype in FLOATS:
        for sx, sy, tx, ty in [((3, 4), (4, 5), False, False), ((2, 3, 4), (4, 5), False, False),
                               ((2, 1, 3, 4), (5, 4, 2), False, False), ((4, 3), (5, 4), True, True),
                               ((2, 4, 3), (4, 5), True, False), ((3, 4), (2, 5, 4), False, True)]:
            yield Case("matmul", {"X": randn(sx, dtype), "Y": randn(sy, dtype)},
                       lambda i, tx=tx, ty=ty: _matmul_ref(i["X"], i["Y"], tx, ty),
                       {"transpose_x": tx, "transpose_y": ty})


def reduction_cases():
    refs = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}
    for op, ref in refs.items():
        for dtype in FLOATS:
            for shape, dim, keep, all_ in [((3, 4), [1], False, False), ((2, 3, 4), [0, -1], True, False),
                                           ((2, 3), [], False, False), ((2, 3, 4), [1], False, True), ((5,), [0], True, False)]:
                axis = None if (all_ or not dim) else tuple(dim)
                yield Case(op, {"X": randn(shape, dtype)},
                           lambda i, ref=ref, axis=axis, keep=keep: ref(i["X"].astype(np.float64), axis=axis, keepdims=keep),
                           {"dim": dim, "keep_dim": keep, "reduce_all": all_})
    for dtype in FLOATS:
        for shape in [(3, 4), (), (2, 3, 4)]:
            yield Case("mean", {"X": randn(shape, dtype)}, lambda i: np.asarray(i["X"].astype(np.float64).sum() / max(i["X"].size, 1)))
        for shape, dim, keep in [((3, 4), [1], False), ((2, 3, 4), [0, 2], True), ((2, 3), [], False)]:
            x = randn(shape, dtype)
            axes = tuple(d % len(shape) for d in dim) or tuple(range(len(shape)))
            g_shape = tuple(1 if a in axes else d for a, d in enumerate(shape)) if keep else \
                tuple(d for a, d in enumerate(shape) if a not in axes)
            count = int(np.prod([shape[a] for a in axes]))
            yield Case("reduce_mean_grad", {"X": x, "Out@GRAD": randn(g_shape, dtype)},
                       lambda i, axes=axes, count=count: {"X@GRAD": [np.broadcast_to(
                           np.reshape(i["Out@GRAD"], [1 if a in axes else d for a, d in enumerate(i["X"].shape)]),
                           i["X"].shape) / count]},
                       {"dim": dim, "keep_dim": keep})


def activation_grad_cases():
    for dtype in FLOATS:
        for shape in [(4,), (2, 3)]:
            yield Case("relu_grad", {"Out": np.maximum(randn(shape, dtype), 0), "Out@GRAD": randn(shape, dtype)},
                       lambda i: {"X@GRAD": [i["Out@GRAD"] * (i["Out"] > 0)]})
            yield Case("tanh_grad", {"Out": np.tanh(randn(shape, dtype)), "Out@GRAD": randn(shape, dtype)},
                       lambda i: {"X@GRAD": [i["Out@GRAD"] * (1 - i["Out"] ** 2)]})
            yield Case("sigmoid_grad", {"Out": 1 / (1 + np.exp(-randn(shape, dtype))), "Out@GRAD": randn(shape, dtype)},
                       lambda i: {"X@GRAD": [i["Out@GRAD"] * i["Out"] * (1 - i["Out"])]})
            x, g = randn(shape, dtype), randn(shape, dtype)
            yield Case("leaky_relu_grad", {"X": x, "Out@GRAD": g},
                       lambda i: {"X@GRAD": [np.where(i["X"] > 0, 1.0, 0.2) * i["Out@GRAD"]]}, {"alpha": 0.2})
            yield Case("clip_grad", {"X": x, "Out@GRAD": g},
                       lambda i: {"X@GRAD": [(np.abs(i["X"] - 0.1) < 0.4) * i["Out@GRAD"]]}, {"min": -0.3, "max": 0.5})
            yield Case("elu_grad", {"X": x, "Out@GRAD": g},
                       lambda i: {"X@GRAD": [np.where(i["X"] > 0, 1.0, 1.5 * np.exp(i["X"].astype(np.float64)))
                                             * i["Out@GRAD"]]}, {"alpha": 1.5})
            yield Case("gelu_grad", {"X": x, "Out@GRAD": g},  # Phi(x) + x phi(x), Phi from scipy's normal CDF
                       lambda i: {"X@GRAD": [(scipy.special.ndtr(i["X"].astype(np.float64)) + i["X"] * np.exp(
                           -0.5 * i["X"].astype(np.float64) ** 2) / np.sqrt(2 * np.pi)) * i["Out@GRAD"]]})


def creation_cases():
    for dtype in FLOATS:
        yield Case("fill_constant", {}, lambda i, d=dtype: np.full((2, 3), 1.5, d), {"shape": [2, 3], "dtype": dtype, "value": 1.5})
        yield Case("uniform_random", {}, lambda i, d=dtype: np.random.Generator(np.random.PCG64(3)).uniform(-2, 3, (4, 5)).astype(d),
                   {"shape": [4, 5], "dtype": dtype, "min": -2.0, "max": 3.0, "seed": 3})
        yield Case("gaussian_random", {}, lambda i, d=dtype: np.random.Generator(np.random.PCG64(5)).normal(1, 2, (6,)).astype(d),
                   {"shape": [6], "dtype": dtype, "mean": 1.0, "std": 2.0, "seed": 5})
        for shape in [(2, 3), ()]:
            x = randn(shape, dtype)
            yield Case("fill_any_like", {"X": x}, lambda i: np.full(i["X"].shape, 2.0, i["X"].dtype), {"value": 2.0})
            yield Case("fill_any_like", {"X": x}, lambda i: np.ones(i["X"].shape, np.int64), {"value": 1.0, "dtype": "int64"},
                       label="int64")
            yield Case("fill_zeros_like", {"X": x}, lambda i: np.zeros_like(i["X"]))
            yield Case("assign", {"X": x}, lambda i: i["X"])
            for out in ("float32", "float64", "int64", "bool"):
                yield Case("cast", {"X": x}, lambda i, out=out: i["X"].astype(out), {"out_dtype": out}, label=out)


def _sum_to(x, shape):
    while x.ndim > len(shape):
        x = x.sum(axis=0)
    for a, d in enumerate(shape):
        if d == 1 and x.shape[a] != 1:
            x = x.sum(axis=a, keepdims=True)
    return x


def manipulation_cases():
    for dtype in FLOATS:
        for n in (1, 2, 3):
            yield Case("sum", {"X": [randn((2, 3), dtype) for _ in range(n)]}, lambda i: sum(i["X"][1:], i["X"][0].copy()))
        for sx, st in [((2, 3, 4), (3, 1)), ((3, 4), (4,)), ((3, 4), (3, 4)), ((2, 3), ())]:
            yield Case("reduce_as", {"X": randn(sx, dtype), "Target": randn(st, dtype)},
                       lambda i: _sum_to(i["X"].astype(np.float64), i["Target"].shape))
        for sx, shape in [((3, 1), [2, 3, 4]), ((4,), [3, 4]), ((), [2])]:
            yield Case("broadcast_to", {"X": randn(sx, dtype)}, lambda i, s=shape: i["X"] + np.zeros(s, i["X"].dtype),
                       {"shape": shape})
            yield Case("broadcast_to", {"X": randn(sx, dtype), "ShapeLike": randn(shape, dtype)},
                       lambda i: i["X"] + np.zeros_like(i["ShapeLike"]), label="like")
        x = randn((2, 3, 4), dtype)
        for shape in ([4, 6], [0, -1], [-1], [2, 3, 2, 2], [0, 0, 4, 1]):
            yield Case("reshape", {"X": x}, lambda i, s=shape: i["X"].flatten().reshape(
                [i["X"].shape[k] if d == 0 else d for k, d in enumerate(s)]), {"shape": shape})
        for perm in ([2, 0, 1], [0, 1, 2], [1, 0, 2]):
            yield Case("transpose", {"X": x}, lambda i, p=perm: np.einsum("abc->" + "".join("abc"[k] for k in p), i["X"]),
                       {"perm": perm})
        for axis in (0, 1, -1):
            parts = [randn(tuple(k + 1 if a == axis % 3 else d for a, d in enumerate((2, 3, 4))), dtype) for k in range(3)]
            yield Case("concat", {"X": parts}, lambda i, a=axis: np.concatenate(i["X"], axis=a), {"axis": axis})
            yield Case("stack", {"X": [x, x * 2]}, lambda i, a=axis: np.moveaxis(np.array(i["X"]), 0, a % 4), {"axis": axis})
        for axis, sections, n in [(1, [1, 2], 2), (-1, [2, 2], 2), (0, [2], 1), (2, [1, 1, 2], 3), (2, [1, -1], 2)]:
            size = x.shape[axis]
            sizes = [size - sum(s for s in sections if s > 0) if s == -1 else s for s in sections]
            yield Case("split", {"X": x}, lambda i, a=axis, sz=sizes: {"Out": [
                np.take(i["X"], range(sum(sz[:k]), sum(sz[:k + 1])), axis=a) for k in range(len(sz))]},
                {"axis": axis, "sections": sections}, {"Out": n})
        for axes, starts, ends in [([0], [1], [2]), ([1, 2], [0, -3], [2, 100]), ([-1], [-2], [10])]:
            def ref(i, axes=axes, starts=starts, ends=ends):
                out = i["X"]
                for a, s, e in zip(axes, starts, ends):
                    n = out.shape[a]
                    s, e = (s + n if s < 0 else s), (e + n if e < 0 else e)
                    out = np.take(out, range(max(0, min(s, n)), max(0, min(e, n))), axis=a)
                return out
            yield Case("slice", {"X": x}, ref, {"axes": axes, "starts": starts, "ends": ends})
        y = randn((1, 3, 1, 2), dtype)
        for axes in ([], [0], [0, 2], [-2]):
            yield Case("squeeze", {"X": y}, lambda i, a=axes: i["X"].reshape(
                [d for k, d in enumerate(i["X"].shape) if not (d == 1 and (not a or k in [q % 4 for q in a]))]), {"axes": axes})
        for axes, shape in [([0], (1, 2, 3, 4)), ([1, 2], (2, 1, 1, 3, 4)), ([-1], (2, 3, 4, 1)), ([0, 4], (1, 2, 3, 4, 1))]:
            yield Case("unsqueeze", {"X": x}, lambda i, s=shape: i["X"].reshape(s), {"axes": axes})
        for axis, index in [(0, np.array([1, 0, 1])), (1, np.array([2, 0])), (-1, np.array([[0, 3], [1, 1]]))]:
            yield Case("gather", {"X": x, "Index": index.astype(np.int64)},
                       lambda i, a=axis: np.moveaxis(np.array([np.take(i["X"], k, axis=a) for k in i["Index"].ravel()]), 0, a % 3)
                       .reshape(i["X"].shape[:a % 3] + i["Index"].shape + i["X"].shape[a % 3 + 1:]), {"axis": axis})


COMPARISONS = {"less_than": lambda x, y: x < y, "less_equal": lambda x, y: x <= y, "greater_than": lambda x, y: x > y,
               "greater_equal": lambda x, y: x >= y, "equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y}


LOGICAL = {"logical_and": lambda x, y: x.astype(int) * y.astype(int) == 1,  # truth tables by integer arithmetic
           "logical_or": lambda x, y: x.astype(int) + y.astype(int) >= 1,
           "logical_xor": lambda x, y: x.astype(int) + y.astype(int) == 1}


def logic_cases():
    for sx, sy in BROADCAST_SHAPES[:4]:
        x, y = rng.random(sx) > 0.5, rng.random(sy) > 0.5
        for op, ref in LOGICAL.items():
            yield Case(op, {"X": x, "Y": y}, lambda i, ref=ref: ref(i["X"], i["Y"]))
        yield Case("logical_not", {"X": x}, lambda i: i["X"].astype(int) == 0)
    for dtype in FLOATS + ("int64",):
        for sx, sy in BROADCAST_SHAPES[:4]:
            x = rng.integers(-2, 3, sx).astype(dtype)
            y = rng.integers(-2, 3, sy).astype(dtype)
            for op, ref in COMPARISONS.items():
                yield Case(op, {"X": x, "Y": y}, lambda i, ref=ref: ref(i["X"], i["Y"]))
    for dtype in FLOATS:
        for sc, sx, sy in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((4,), (3, 4), ())]:
            yield Case("where", {"Condition": rng.random(sc) > 0.5, "X": randn(sx, dtype), "Y": randn(sy, dtype)},
                       lambda i: i["Condition"] * i["X"] + (~i["Condition"]) * i["Y"])
        x = randn((2, 3, 4), dtype)
        for axis, keep in [(0, False), (-1, True), (1, False)]:
            yield Case("argmax", {"X": x}, lambda i, a=axis, k=keep: (np.expand_dims if k else lambda v, _: v)(
                np.apply_along_axis(lambda r: int(np.flatnonzero(r == r.max())[0]), a, i["X"]), a).astype(np.int64),
                {"axis": axis, "keep_dim": keep})
    for shape in [(5,), (2, 3)]:
        ids = rng.integers(0, 4, shape).astype(np.int64)
        for dtype in FLOATS:
            yield Case("one_hot", {"X": ids}, lambda i, d=dtype: np.eye(4, dtype=d)[i["X"]], {"depth": 4, "dtype": dtype})


def _log_softmax_ref(x, axis):
    x = x.astype(np.float64)
    with np.errstate(divide="ignore"):  # an empty axis: log of an empty sum, over nothing
        return x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))


def nn_cases():
    for dtype in FLOATS:
        for shape, axis in [((3, 5), -1), ((2, 3, 4), 1), ((6,), 0), ((3, 0), -1), ((0,), 0), ((0, 4), 0)]:
            x = randn(shape, dtype) * 3  # (an empty axis: nothing to normalize, an empty result)
            yield Case("softmax", {"X": x}, lambda i, a=axis: np.exp(_log_softmax_ref(i["X"], a)), {"axis": axis})
            yield Case("log_softmax", {"X": x}, lambda i, a=axis: _log_softmax_ref(i["X"], a), {"axis": axis})
            y = np.exp(_log_softmax_ref(x, axis)).astype(dtype)
            yield Case("softmax_grad", {"Out": y, "Out@GRAD": randn(shape, dtype)},
                       lambda i, a=axis: {"X@GRAD": [i["Out"] * (i["Out@GRAD"] - np.sum(
                           i["Out@GRAD"].astype(np.float64) * i["Out"], axis=a, keepdims=True))]}, {"axis": axis})
        for batch in [(4,), (2, 3)]:
            probs = np.exp(_log_softmax_ref(randn(batch + (5,)), -1)).astype(dtype)
            hard = rng.integers(0, 5, batch + (1,)).astype(np.int64)
            soft = np.exp(_log_softmax_ref(randn(batch + (5,)), -1)).astype(dtype)
            pick = lambda p, l, batch=batch: np.array([p.reshape(-1, 5)[r, c] for r, c in enumerate(l.ravel())]).reshape(l.shape[:len(batch)] + (1,))
            for label in (hard, hard[..., 0]):
                yield Case("cross_entropy", {"X": probs, "Label": label}, lambda i, pick=pick: -np.log(pick(i["X"], i["Label"])),
                           {"soft_label": False}, label=f"hard{label.ndim}")
                logits = randn(batch + (5,), dtype) * 4
                yield Case("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
                           lambda i, pick=pick: {"Softmax": [np.exp(_log_softmax_ref(i["Logits"], -1))],
                                                 "Loss": [-pick(_log_softmax_ref(i["Logits"], -1), i["Label"])]},
                           {"soft_label": False}, label=f"hard{label.ndim}")
            yield Case("cross_entropy", {"X": probs, "Label": soft},
                       lambda i: -(i["Label"] * np.log(i["X"].astype(np.float64))).sum(-1, keepdims=True), {"soft_label": True})
            logits = randn(batch + (5,), dtype) * 4
            yield Case("softmax_with_cross_entropy", {"Logits": logits, "Label": soft},
                       lambda i: {"Softmax": [np.exp(_log_softmax_ref(i["Logits"], -1))],
                                  "Loss": [-(i["Label"] * _log_softmax_ref(i["Logits"], -1)).sum(-1, keepdims=True)]},
                       {"soft_label": True}, label="soft")
        for shape in [(3, 4), (5,)]:
            yield Case("sigmoid_cross_entropy_with_logits", {"X": randn(shape, dtype) * 3, "Label": rng.random(shape).astype(dtype)},
                       lambda i: -(i["Label"] * np.log(_sigmoid_ref(i["X"])) + (1 - i["Label"]) * np.log(1 - _sigmoid_ref(i["X"]))))


def recurrent_cases():
    """lstm and gru in float32 (ONNX Runtime, which the export test runs them in, has no float64 LSTM or GRU),
    against the step-by-step reference of tests/recurrent; float64 is in the forward-mode and gradient tests."""
    from tests.recurrent.cases import inputs, reference
    for cell in ("lstm", "gru"):
        for seed, (reverse, lens, full) in enumerate([(False, None, True), (True, None, False), (False, [3, 2, 5, 1], True),
                                                      (True, [1, 5, 2, 4], False), (False, [2, 1, 4, 3], False)]):
            ins = inputs(cell, 5, 4, 3, 2, seed=seed, dtype="float32", bias=full, initial=full)
            attrs = {"is_reverse": reverse, **({"linear_before_reset": full} if cell == "gru" else {})}
            feed = {**ins, **({"SeqLens": np.asarray(lens, np.int32)} if lens else {})}
            label = f"reverse={reverse},lens={lens},full={full}"
            yield Case(cell, feed, lambda i, c=cell, a=attrs, n=lens: {
                k: [v] for k, v in reference(c, i, a["is_reverse"], a.get("linear_before_reset", True), n).items()},
                attrs, label=label)
    yield from _recurrent_activation_cases()


def _recurrent_activation_cases():
    """lstm and gru with ONNX's other activations (each at least once), both directions."""
    from tests.recurrent.cases import GRU_ACTIVATIONS, LSTM_ACTIVATIONS, activation_attrs, inputs, reference
    for cell, sets in (("lstm", LSTM_ACTIVATIONS), ("gru", GRU_ACTIVATIONS)):
        for seed, (names, alphas, betas) in enumerate(sets):
            reverse, lens = bool(seed % 2), [3, 2, 5, 1] if seed == 1 else None
            ins = inputs(cell, 5, 4, 3, 2, seed=40 + seed, dtype="float32")
            attrs = {"is_reverse": reverse, **activation_attrs(names, alphas, betas)}
            feed = {**ins, **({"SeqLens": np.asarray(lens, np.int32)} if lens else {})}
            acts = list(zip(names, alphas or [0.0] * len(names), betas or [0.0] * len(names)))
            yield Case(cell, feed, lambda i, c=cell, r=reverse, n=lens, a=acts: {
                k: [v] for k, v in reference(c, i, r, True, n, a).items()}, attrs,
                label=f"{'+'.join(names)},reverse={reverse}")


ALL_CASES = [*unary_cases(), *elementwise_cases(), *linalg_cases(), *reduction_cases(), *activation_grad_cases(),
             *creation_cases(), *manipulation_cases(), *logic_cases(), *nn_cases(), *NEW_OP_CASES,
             *OPS23_CASES, *recurrent_cases(), *METRIC_CASES]
