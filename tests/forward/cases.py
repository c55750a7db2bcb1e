"""Every differentiable op on float64 inputs, for the forward-mode tests: the kernel test cases plus the ops
those do not cover (convolution, pooling, batch and layer norm, dropout, lookups, the fused grad ops)."""
from __future__ import annotations

import numpy as np

from gradgen.grad_makers.tangents import TANGENT_RULES
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case

rng = np.random.default_rng(77)


def _r(*shape):
    return rng.standard_normal(shape)


def _away(*shape):
    return rng.uniform(0.3, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


CONV = {"strides": [1, 2], "paddings": [1, 0], "dilations": [1, 1], "groups": 1}
POOL = {"ksize": [2, 2], "strides": [1, 2], "paddings": [0, 1]}


def extra_cases():
    x, w = _r(2, 2, 5, 6), _r(3, 2, 3, 2)
    out_shape = (2, 3, 5, 3)
    yield Case("conv2d", {"Input": x, "Filter": w}, None, CONV)
    yield Case("conv2d_input_grad", {"Filter": w, "Output@GRAD": _r(*out_shape), "Input": x}, None, CONV)
    yield Case("conv2d_filter_grad", {"Input": x, "Output@GRAD": _r(*out_shape), "Filter": w}, None, CONV)
    for kind in ("max", "avg"):
        attrs = {"pooling_type": kind, **POOL}
        yield Case("pool2d", {"X": x}, None, attrs, label=kind)
        yield Case("pool2d_grad", {"X": x, "Out@GRAD": _r(2, 2, 4, 4)}, None, attrs, label=kind)
        if kind == "max":  # pool2d_select picks each max window's argmax; it has no average form
            yield Case("pool2d_select", {"X": x, "D": _r(2, 2, 5, 6)}, None, attrs, label=kind)
    # one and three spatial dims, pooling dilated
    x1, w1, x3, w3 = _r(2, 2, 7), _r(3, 1, 2), _r(1, 2, 3, 4, 3), _r(2, 2, 2, 2, 1)
    conv1 = {"strides": [2], "paddings": [1], "dilations": [2], "groups": 2}
    conv3 = {"strides": [1, 2, 1], "paddings": [1, 0, 0], "dilations": [1, 1, 2], "groups": 1}
    yield Case("conv2d", {"Input": x1, "Filter": _r(4, 1, 2)}, None, conv1, label="1d")
    yield Case("conv2d", {"Input": x3, "Filter": w3}, None, conv3, label="3d")
    yield Case("conv2d_transpose", {"Input": x1, "Filter": w1[:2]}, None, {**conv1, "output_padding": [1]},
               label="1d")
    yield Case("conv2d_filter_grad", {"Input": x3, "Output@GRAD": _r(1, 2, 4, 2, 3), "Filter": w3}, None, conv3,
               label="3d")
    yield Case("conv2d_input_grad", {"Filter": w3, "Output@GRAD": _r(1, 2, 4, 2, 3), "Input": x3}, None, conv3,
               label="3d")
    for kind in ("max", "avg"):
        attrs = {"pooling_type": kind, "ksize": [2, 2, 2], "strides": [1, 1, 2], "paddings": [0, 1, 0],
                 "dilations": [2, 1, 1]}
        yield Case("pool2d", {"X": x3}, None, attrs, label=f"3d-{kind}")
        yield Case("pool2d_grad", {"X": x3, "Out@GRAD": _r(1, 2, 1, 5, 1)}, None, attrs, label=f"3d-{kind}")
    yield Case("pool2d_select", {"X": x1, "D": _r(2, 2, 7)}, None,
               {"pooling_type": "max", "ksize": [3], "strides": [2], "paddings": [1], "dilations": [2]}, label="1d")
    for test in (False, True):
        yield Case("batch_norm", {"X": _r(4, 3, 2, 2), "Scale": _r(3), "Bias": _r(3), "Mean": _r(3),
                                  "Variance": rng.uniform(0.5, 2.0, 3)}, None, {"is_test": test}, label=f"test={test}")
        yield Case("batch_norm_grad", {"X": _r(4, 3, 2), "Scale": _r(3), "Y@GRAD": _r(4, 3, 2),
                                       **({"Mean": _r(3), "Variance": rng.uniform(0.5, 2.0, 3)} if test else {})},
                   None, {"is_test": test}, label=f"test={test}")
    for affine in ({}, {"Scale": _r(3, 4)}, {"Scale": _r(3, 4), "Bias": _r(3, 4)}):
        yield Case("layer_norm", {"X": _r(2, 3, 4), **affine}, None, {"begin_norm_axis": 1},
                   label=f"affine={sorted(affine)}")
        if "Bias" not in affine:
            yield Case("layer_norm_grad", {"X": _r(2, 3, 4), **affine, "Y@GRAD": _r(2, 3, 4)}, None,
                       {"begin_norm_axis": 1}, label=f"affine={sorted(affine)}")
    yield Case("softmax_grad", {"Out": _r(3, 4), "Out@GRAD": _r(3, 4)}, None, {"axis": 0})
    yield Case("softmax_with_cross_entropy", {"Logits": _r(3, 4), "Label": rng.uniform(0.1, 1.0, (3, 4))}, None,
               {"soft_label": True}, label="rows not summing to 1")
    yield Case("dropout", {"X": _r(3, 4)}, None, {"p": 0.4, "seed": 3})
    yield Case("lookup_table", {"W": _r(5, 3), "Ids": np.array([[1], [4], [1]], np.int64)}, None)
    for op, inputs in [("clip_grad", {"X": _away(3, 4) * 2}), ("leaky_relu_grad", {"X": _away(3, 4)}),
                       ("gelu_grad", {"X": _r(3, 4)})]:
        attrs = {"min": -0.7, "max": 0.9} if op == "clip_grad" else ({"alpha": 0.2} if op == "leaky_relu_grad" else {})
        yield Case(op, {**inputs, "Out@GRAD": _r(3, 4)}, None, attrs)
    yield Case("slice_grad", {"X": _r(3, 4), "Out@GRAD": _r(3, 2)}, None, {"axes": [1], "starts": [1], "ends": [3]})
    yield Case("gather_grad", {"X": _r(4, 3), "Index": np.array([2, 0, 2], np.int64), "Out@GRAD": _r(3, 3)}, None)
    yield Case("reshape_as", {"X": _r(2, 6), "Target": _r(3, 4)}, None)
    probs = rng.uniform(0.1, 1.0, (2, 3, 5))
    for labels in (np.array([[2, -100, 0], [-100, 4, 1]]), np.array([[[3], [1], [-100]], [[0], [-100], [-100]]])):
        ignored = {"soft_label": False, "ignore_index": -100}
        yield Case("cross_entropy", {"X": probs, "Label": labels}, None, ignored, label=f"ignored{labels.ndim}")
        yield Case("softmax_with_cross_entropy", {"Logits": _r(2, 3, 5), "Label": labels}, None, ignored,
                   label=f"ignored{labels.ndim}")
    in_range = {"soft_label": False, "ignore_index": 1}  # an ignored label that is also a class
    yield Case("cross_entropy", {"X": probs, "Label": np.array([[1, 3, 0], [1, 1, 4]])}, None, in_range,
               label="ignored class 1")
    yield Case("softmax_with_cross_entropy", {"Logits": _r(2, 3, 5), "Label": np.array([[1, 3, 0], [1, 1, 4]])},
               None, in_range, label="ignored class 1")
    yield Case("softmax_with_cross_entropy", {"Logits": _r(2, 4, 3), "Label": np.array([[[1, 0, 3]], [[2, 2, -1]]])},
               None, {"soft_label": False, "axis": 1, "ignore_index": -1}, label="classes on axis 1, ignored")
    distinct = rng.permutation(15).reshape(3, 5) * 0.3 + 0.05  # no ties: top_k is differentiable there
    for k, axis, largest in [(2, -1, True), (3, 0, False)]:
        yield Case("top_k", {"X": distinct}, None, {"k": k, "axis": axis, "largest": largest},
                   label=f"distinct,k={k},axis={axis},largest={largest}")
        yield Case("sort", {"X": distinct}, None, {"axis": axis, "descending": largest},
                   label=f"distinct,axis={axis},descending={largest}")
    yield Case("split_like", {"X": _r(5, 3), "Like": [_r(2, 3), _r(3, 3)]}, None, {"axis": 0}, {"Out": 2})
    from tests.recurrent.cases import inputs  # lstm, gru in float64 (their kernel cases are float32)
    for cell in ("lstm", "gru"):
        for reverse, lens in [(False, None), (True, np.array([2, 3], np.int64))]:
            yield Case(cell, {**inputs(cell, 3, 2, 2, 2, seed=3), **({"SeqLens": lens} if lens is not None else {})},
                       None, {"is_reverse": reverse}, label=f"reverse={reverse},lens={lens is not None}")


def float64_cases() -> list[Case]:
    """The float64 cases of every op that has a tangent rule."""
    def is_f64(case):
        """Every float input float64 and at least one of them (an all-integer case has nothing to move)."""
        dtypes = {np.asarray(v).dtype for vs in case.inputs.values() for v in (vs if isinstance(vs, list) else [vs])}
        floats = {d for d in dtypes if np.issubdtype(d, np.floating)}
        float64_out = case.attrs.get("out_dtype", "float64") == "float64"
        return float64_out and floats == {np.dtype(np.float64)}
    return [c for c in [*ALL_CASES, *extra_cases()] if c.op in TANGENT_RULES and is_f64(c)]


def at_a_kink(case: Case) -> bool:
    """Whether the case's op is not differentiable at its inputs, so finite differences say nothing there:
    top_k and sort on tied values (the kernel cases check the tie order), logsumexp over no elements (-inf
    everywhere), elementwise_mod where X is a multiple of Y (the remainder jumps there). The dot-product and
    Hessian tests still run them: both modes must agree at ties too."""
    if case.op in ("top_k", "sort"):
        x = np.moveaxis(np.asarray(case.inputs["X"]), case.attrs["axis"], -1)
        return x.size > 0 and any(len(np.unique(row)) < len(row) for row in x.reshape(-1, x.shape[-1]))
    if case.op == "elementwise_mod":
        return bool((np.fmod(case.inputs["X"], case.inputs["Y"]) == 0).any())
    return case.op == "logsumexp" and np.asarray(case.inputs["X"]).size == 0
