"""One-op cases for the op types ``tests/framework/op_cases.py`` has no case for (grad ops, optimizers, conv,
pooling, network ops), plus wide-range gelu inputs for the float64 erf series. The ONNX tests compare
ONNX Runtime with gradgen's executor on them, so they carry no expected values of their own."""
from __future__ import annotations

import numpy as np

from tests.framework.op_harness import Case

rng = np.random.default_rng(99)
FLOATS = ("float32", "float64")


def randn(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _out_size(n, k, s, p, d):
    return (n + 2 * p - (k - 1) * d - 1) // s + 1


CONV = [  # x shape, filters, kernel, stride, padding, dilation, groups
    ((2, 3, 6, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 7, 7), 6, (3, 2), (2, 1), (0, 1), (1, 2), 2),
    ((2, 2, 5, 6), 2, (2, 2), (2, 3), (1, 0), (1, 1), 1),
    ((2, 4, 9), 2, (3,), (2,), (1,), (2,), 2),  # 1-D
    ((1, 2, 4, 5, 3), 3, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), 1),  # 3-D
]
POOL = [  # x shape, ksize, strides, paddings, dilations
    ((2, 2, 4, 4), (2, 2), (2, 2), (0, 0), (1, 1)), ((1, 3, 5, 6), (3, 2), (2, 1), (1, 1), (1, 1)),
    ((1, 2, 7, 6), (2, 2), (1, 2), (1, 0), (2, 2)), ((2, 2, 9), (3,), (2,), (1,), (2,)),
    ((1, 2, 4, 5, 4), (2, 2, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2)),
]

TRANSPOSE = [  # 1-D and 3-D (the op cases have 2-D): x shape, filter shape, strides, paddings, dilations, groups, extra
    ((2, 3, 4), (3, 2, 3), [2], [1], [1], 1, [1]),
    ((1, 2, 2, 3, 2), (2, 2, 2, 1, 2), [2, 1, 2], [0, 0, 1], [1, 2, 1], 2, [1, 0, 0]),
]


def conv_cases():
    for dtype in FLOATS:
        for xs, f, k, s, p, d, g in CONV:
            attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d), "groups": g}
            x, w = randn(xs, dtype), randn((f, xs[1] // g) + k, dtype)
            gout = randn((xs[0], f, *map(_out_size, xs[2:], k, s, p, d)), dtype)
            yield Case("conv2d", {"Input": x, "Filter": w}, None, attrs)
            yield Case("conv2d_input_grad", {"Filter": w, "Output@GRAD": gout, "Input": x}, None, attrs)
            yield Case("conv2d_filter_grad", {"Input": x, "Output@GRAD": gout, "Filter": w}, None, attrs)
        for xs, k, s, p, d in POOL:
            out = list(map(_out_size, xs[2:], k, s, p, d))
            x = np.round(randn(xs, dtype), 1)  # ties inside windows: the first maximum wins
            common = {"ksize": list(k), "strides": list(s), "paddings": list(p), "dilations": list(d)}
            for kind in ("max", "avg"):
                attrs = {"pooling_type": kind, **common}
                yield Case("pool2d", {"X": x}, None, attrs, label=kind)
                yield Case("pool2d_grad", {"X": x, "Out@GRAD": randn((xs[0], xs[1], *out), dtype)}, None, attrs,
                           label=kind)
            yield Case("pool2d_select", {"X": x, "D": randn(xs, dtype)}, None, {"pooling_type": "max", **common})
        for xs, ws, s, p, d, g, e in TRANSPOSE:
            yield Case("conv2d_transpose", {"Input": randn(xs, dtype), "Filter": randn(ws, dtype)}, None,
                       {"strides": s, "paddings": p, "dilations": d, "groups": g, "output_padding": e})


def grad_op_cases():
    for dtype in FLOATS:
        x, dout = randn((3, 4), dtype), randn((3, 4), dtype)
        yield Case("leaky_relu_grad", {"X": x, "Out@GRAD": dout}, None, {"alpha": 0.2})
        yield Case("clip_grad", {"X": x, "Out@GRAD": dout}, None, {"min": -0.3, "max": 0.4})
        wide = np.linspace(-9, 9, 181).astype(dtype)
        yield Case("gelu_grad", {"X": wide, "Out@GRAD": np.ones_like(wide)}, None, label="wide")
        yield Case("gelu", {"X": wide}, None, label="wide")
        yield Case("gelu_grad", {"X": x, "Out@GRAD": dout}, None)
        x3 = randn((2, 3, 4), dtype)
        yield Case("slice_grad", {"X": x3, "Out@GRAD": randn((2, 2, 3), dtype)}, None,
                   {"axes": [1, -1], "starts": [1, -3], "ends": [100, 4]})
        for strides, starts, ends in [([2, -1], [0, -1], [100, -100]), ([-2, 3], [2, 0], [-100, 4]),
                                      ([5, 2], [1, 1], [2, 2])]:  # steps both ways, and one element per axis
            got = x3[:, slice(starts[0], ends[0], strides[0]), slice(starts[1], ends[1], strides[1])]
            yield Case("slice_grad", {"X": x3, "Out@GRAD": randn(got.shape, dtype)}, None,
                       {"axes": [1, 2], "starts": starts, "ends": ends, "strides": strides},
                       label=f"strides={strides}")
        for axis, index in [(0, np.array([1, 0, 1])), (-1, np.array([[0, 3], [-1, 0]]))]:
            gshape = x3.shape[:axis % 3] + index.shape + x3.shape[axis % 3 + 1:]
            yield Case("gather_grad", {"X": x3, "Index": index.astype(np.int64), "Out@GRAD": randn(gshape, dtype)},
                       None, {"axis": axis})
        yield Case("reshape_as", {"X": x3, "Target": randn((4, 6), dtype)}, None)
        yield Case("split_like", {"X": x3, "Like": [randn((2, 1, 4), dtype), randn((2, 2, 4), dtype)]}, None,
                   {"axis": 1}, {"Out": 2})


def network_cases():
    for dtype in FLOATS:
        x = randn((4, 3, 2, 2), dtype)
        stats = {"Scale": randn((3,), dtype), "Bias": randn((3,), dtype), "Mean": randn((3,), dtype),
                 "Variance": rng.uniform(0.5, 2, 3).astype(dtype)}
        for is_test in (False, True):
            yield Case("batch_norm", {"X": x, **stats}, None, {"momentum": 0.9, "epsilon": 1e-5, "is_test": is_test},
                       label=f"test={is_test}")
            grad_stats = {"Mean": stats["Mean"], "Variance": stats["Variance"]} if is_test else {}
            yield Case("batch_norm_grad", {"X": x, "Scale": stats["Scale"], **grad_stats,
                                           "Y@GRAD": randn(x.shape, dtype)}, None,
                       {"epsilon": 1e-5, "is_test": is_test}, label=f"test={is_test}")
        yield Case("batch_norm", {"X": x, **stats}, None, {"momentum": 0.8, "running_variance": "unbiased"},
                   label="unbiased")
        for estimator in ("population", "unbiased"):  # an empty batch leaves the running statistics as they were
            yield Case("batch_norm", {"X": np.zeros((0, 3, 2, 2), dtype), **stats}, None,
                       {"momentum": 0.8, "running_variance": estimator}, label=f"empty,{estimator}")
        x3 = randn((2, 3, 4), dtype) * 2 + 1
        for begin, affine in [(1, ("Scale", "Bias")), (2, ("Scale",)), (-1, ()), (0, ("Bias",))]:
            params = {s: randn(x3.shape[begin % 3:], dtype) for s in affine}
            attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
            yield Case("layer_norm", {"X": x3, **params}, None, attrs, label=f"begin={begin},{'+'.join(affine)}")
            params.pop("Bias", None)
            yield Case("layer_norm_grad", {"X": x3, **params, "Y@GRAD": randn(x3.shape, dtype)}, None, attrs,
                       label=f"begin={begin},{'+'.join(params)}")
        for axis in (-1, 1):
            yield Case("softmax_grad", {"Out": rng.uniform(0, 1, x3.shape).astype(dtype),
                                        "Out@GRAD": randn(x3.shape, dtype)}, None, {"axis": axis}, label=f"axis={axis}")
        yield Case("dropout", {"X": x}, None, {"p": 0.5, "is_test": True}, label="is_test")
        yield Case("dropout", {"X": x}, None, {"p": 0.0}, label="p=0")
        yield Case("lookup_table", {"W": randn((5, 3), dtype), "Ids": np.array([[0, 4], [2, 2]], np.int64)}, None)


def optimizer_cases():
    for dtype in FLOATS:
        p, g, v = randn((3, 2), dtype), randn((3, 2), dtype), randn((3, 2), dtype)
        lr = np.asarray(0.1, dtype)
        yield Case("sgd", {"Param": p, "Grad": g, "LearningRate": lr}, None)
        for nesterov in (False, True):
            yield Case("momentum", {"Param": p, "Grad": g, "Velocity": v, "LearningRate": lr}, None,
                       {"mu": 0.9, "use_nesterov": nesterov}, label=f"nesterov={nesterov}")
        yield Case("adam", {"Param": p, "Grad": g, "LearningRate": lr, "Moment1": v, "Moment2": np.abs(v),
                            "Beta1Pow": np.asarray(0.9 ** 3, dtype), "Beta2Pow": np.asarray(0.999 ** 3, dtype)},
                   None, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8})
        adam_ins = {"Param": p, "Grad": g, "LearningRate": lr, "Moment1": v, "Moment2": np.abs(v),
                    "Beta1Pow": np.asarray(0.8 ** 3, dtype), "Beta2Pow": np.asarray(0.9 ** 3, dtype)}
        yield Case("adamw", adam_ins, None, {"beta1": 0.8, "beta2": 0.9, "epsilon": 1e-6, "coeff": 0.3})
        for label, param in (("", p), ("zero_param", np.zeros_like(p))):
            yield Case("lamb", {**adam_ins, "Param": param}, None, {"beta1": 0.8, "beta2": 0.9, "weight_decay": 0.1},
                       label=label)
        scalar_ins = {"Param": randn((), dtype), "Grad": randn((), dtype), "LearningRate": np.asarray([0.1], dtype),
                      "Moment1": randn((), dtype), "Moment2": np.abs(randn((), dtype)),
                      "Beta1Pow": np.asarray([0.8 ** 3], dtype), "Beta2Pow": np.asarray([0.9 ** 3], dtype)}
        for op, attrs in (("adam", {}), ("adamw", {"coeff": 0.3}), ("lamb", {"weight_decay": 0.1})):
            yield Case(op, scalar_ins, None, {"beta1": 0.8, "beta2": 0.9, **attrs},
                       label="rank-0 Param, [1] beta powers")  # (the step stayed [1] on numpy and in ONNX)
        for centered, mu in ((False, 0.0), (True, 0.9)):
            yield Case("rmsprop", {"Param": p, "Grad": g, "LearningRate": lr, "MeanSquare": 2.0 + np.abs(v),
                                   "MeanGrad": v / 2, "Moment": v}, None,
                       {"rho": 0.9, "epsilon": 1e-6, "momentum": mu, "centered": centered},
                       label=f"centered={centered}")
        yield Case("adagrad", {"Param": p, "Grad": g, "LearningRate": lr, "Moment": np.abs(v)}, None,
                   {"epsilon": 1e-6})
        yield Case("global_norm", {"X": [p, g]}, None)
        for max_norm in (0.5, 100.0):
            yield Case("clip_by_global_norm", {"X": [p, g]}, None, {"max_norm": max_norm}, {"Out": 2},
                       label=f"max={max_norm}")


def domain_cases():
    """Zero-size dims, size-1 dims and integer dtypes through ops that take them."""
    for dtype in ("int32", "int64"):
        a, b = rng.integers(-5, 5, (3, 4)).astype(dtype), rng.integers(-5, 5, (1, 4)).astype(dtype)
        for op in ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_max", "elementwise_min"):
            yield Case(op, {"X": a, "Y": b}, None, label=dtype)
        # not int32 reduce_sum: gradgen's kernel returns int64 there (numpy's sum), against its declared int32
        for op in ("reduce_sum", "reduce_max", "reduce_min")[dtype == "int32":]:
            yield Case(op, {"X": a}, None, {"dim": [0], "keep_dim": False}, label=dtype)
        yield Case("transpose", {"X": a}, None, {"perm": [1, 0]}, label=dtype)
        divisor = np.array([[3, -3, 2, -1]], dtype)
        for fmod in (False, True):  # both remainders, on integers and (below) floats, with both signs
            yield Case("elementwise_mod", {"X": a, "Y": divisor}, None, {"fmod": fmod}, label=f"{dtype} fmod={fmod}")
        yield Case("concat", {"X": [a, b]}, None, {"axis": 0}, label=dtype)
        yield Case("gather", {"X": a, "Index": np.array([2, 0, 2], np.int64)}, None, {"axis": 0}, label=dtype)
    for dtype in FLOATS:
        empty = np.zeros((0, 3), dtype)
        yield Case("reduce_sum", {"X": empty}, None, {"dim": [0], "keep_dim": False}, label="zero-size")
        yield Case("matmul", {"X": empty, "Y": randn((3, 2), dtype)}, None, label="zero-size")
        yield Case("matmul", {"X": randn((2, 0), dtype), "Y": np.zeros((0, 4), dtype)}, None, label="zero-inner")
        yield Case("softmax", {"X": empty}, None, {"axis": -1}, label="zero-size")
        yield Case("relu", {"X": empty}, None, label="zero-size")
        yield Case("concat", {"X": [empty, randn((2, 3), dtype)]}, None, {"axis": 0}, label="zero-size")
        yield Case("elementwise_add", {"X": empty, "Y": randn((1, 3), dtype)}, None, label="zero-size")
        yield Case("reduce_mean_grad", {"X": empty, "Out@GRAD": randn((3,), dtype)}, None,
                   {"dim": [0], "keep_dim": False}, label="zero-size")
        yield Case("sum", {"X": [randn((1, 3), dtype), randn((1, 3), dtype)]}, None, label="size-1")
        yield Case("elementwise_mod", {"X": 5 * randn((2, 3), dtype), "Y": np.array([2.5, -1.5, 0.75], dtype)}, None,
                   {"fmod": True}, label="fmod")


def schedule_cases():
    """The step counter and the learning-rate schedules, on steps before, at and after their boundaries, with
    int32 and int64 counters of shape [] and [1]."""
    steps = [np.asarray(s, dt).reshape(shape) for s, dt, shape in
             [(0, "int64", ()), (7, "int64", (1,)), (10, "int32", ()), (25, "int64", ()), (123, "int32", (1,))]]
    for step in steps:
        yield Case("increment", {"X": step}, None, {"step": 1.0})
        yield Case("piecewise_decay", {"Step": step}, None,
                   {"boundaries": [7, 20], "values": [0.5, 0.25, 0.125], "dtype": "float32"})
        for dtype in FLOATS:
            for stair in (False, True):
                yield Case("exponential_decay", {"Step": step}, None,
                           {"learning_rate": 0.3, "decay_steps": 4, "decay_rate": 0.9, "staircase": stair,
                            "dtype": dtype}, label=f"{dtype},staircase={stair}")
            yield Case("cosine_decay", {"Step": step}, None,
                       {"learning_rate": 0.2, "step_each_epoch": 3, "epochs": 5, "dtype": dtype}, label=dtype)
            yield Case("linear_lr_warmup", {"Step": step, "LearningRate": np.asarray(0.05, dtype)}, None,
                       {"warmup_steps": 10, "start_lr": 0.001, "end_lr": 0.1})
    yield Case("increment", {"X": np.asarray([2.5])}, None, {"step": -0.5}, label="float")


def new_op_domain_cases():
    """The newer ops at the edges of their domain: zeros and ties, -inf rows, repeated and negative indices,
    integer dtypes, size-1 and zero-size dims."""
    for dtype in FLOATS:
        x = np.array([[2.0, 0.0, 3.0, 0.0], [1.0, 0.0, 4.0, 5.0], [1.5, -2.0, 0.5, 3.0]], dtype)  # 0, 1, 2 zeros
        for dim in ([1], [0], []):
            yield Case("prod_others", {"X": x}, None, {"dim": dim}, label=f"zeros,dim={dim}")
        yield Case("prod_others", {"X": np.zeros((2, 0, 3), dtype)}, None, {"dim": [2]},
                   label="zero-size")
        yield Case("prod_others", {"X": randn((3, 1), dtype)}, None, {"dim": [1]}, label="size-1")
        rows = np.array([[-np.inf, -np.inf, -np.inf], [1.0, -np.inf, 2.0], [1e3, 1e3, -1e3]], dtype)
        yield Case("logsumexp", {"X": rows}, None, {"dim": [1], "keep_dim": True}, label="-inf rows")
        ties = np.array([[1.0, 3.0, 3.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0]], dtype)
        for largest in (True, False):
            yield Case("top_k", {"X": ties}, None, {"k": 3, "axis": 1, "largest": largest}, label=f"ties,{largest}")
        index = np.array([[1, -1, 1], [0, 0, -4]], np.int64)
        yield Case("scatter_add", {"X": randn((4, 3), dtype), "Index": index, "Updates": randn((2, 3, 3), dtype)},
                   None, {"axis": 0}, label="repeated,negative")
        yield Case("take_along_axis", {"X": randn((2, 4), dtype), "Index": np.array([[-1, 0], [3, -4]], np.int64)},
                   None, {"axis": 1}, label="negative")
        yield Case("take_along_axis_grad", {"X": randn((2, 4), dtype), "Index": np.array([[1, 1], [-1, 3]], np.int64),
                                            "Out@GRAD": randn((2, 2), dtype)}, None, {"axis": 1}, label="repeated")
    for dtype in ("int32", "int64"):
        a = np.array([[3, 1, 3, -2], [0, 5, 5, 5]], dtype)
        yield Case("top_k", {"X": a}, None, {"k": 2, "axis": -1, "largest": True}, label=dtype)
        yield Case("argmin", {"X": a}, None, {"axis": 1, "keep_dim": False}, label=dtype)
        yield Case("cumsum", {"X": a}, None, {"axis": 1, "exclusive": True, "reverse": True}, label=dtype)
        yield Case("reduce_prod", {"X": a}, None, {"dim": [1], "keep_dim": False}, label=dtype)
        yield Case("pad", {"X": a}, None, {"paddings": [1, 0, 0, 2], "pad_value": -7.0}, label=dtype)
    flags = np.array([[True, False, True, False], [False, False, True, True]])
    yield Case("top_k", {"X": flags}, None, {"k": 3, "axis": 1, "largest": True}, label="bool")  # TopK via int32


EXTRA_CASES = [*conv_cases(), *grad_op_cases(), *network_cases(), *optimizer_cases(),
               *domain_cases(), *schedule_cases(), *new_op_domain_cases()]
