"""ONNX LSTM and GRU nodes (every direction, sequence lengths, initial states, batch-major layout, both GRU
forms, ONNX's other activations with their alpha and beta lists) imported and run by gradgen equal ONNX
Runtime's outputs (float32; ONNX Runtime has no float64 LSTM or
GRU; it has no batch-major layout either, so a layout=1 model is checked against the same model in layout 0);
what the importer does not support is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from tests.onnx.runtime import require, run_ort

T, N, I, H = 4, 3, 2, 3
LENS = np.array([4, 1, 3], np.int32)  # no zero length: ONNX Runtime zeroes that sequence's final state


def _model(cell: str, direction: str, layout: int, lens: bool, initial: bool, **attrs):
    onnx = require("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(len(direction) + lens + initial)
    gates, dirs = {"LSTM": 4, "GRU": 3}[cell], 2 if direction == "bidirectional" else 1
    inits = {"W": rng.standard_normal((dirs, gates * H, I)), "R": rng.standard_normal((dirs, gates * H, H)),
             "B": rng.standard_normal((dirs, 2 * gates * H))}
    major = (lambda a: a.transpose(1, 0, 2)) if layout else (lambda a: a)  # noqa: E731
    feed = {"X": major(rng.standard_normal([T, N, I]).astype(np.float32))}
    names = ["X", "W", "R", "B", "sequence_lens" if lens else ""]
    if lens:
        feed["sequence_lens"] = LENS
    if initial:
        names.append("initial_h")
        feed["initial_h"] = major(rng.standard_normal([dirs, N, H]).astype(np.float32))
        if cell == "LSTM":
            names.append("initial_c")
            feed["initial_c"] = major(rng.standard_normal([dirs, N, H]).astype(np.float32))
    outs = ["Y", "Y_h", "Y_c"] if cell == "LSTM" else ["Y", "Y_h"]
    node = helper.make_node(cell, names, outs, direction=direction, hidden_size=H, layout=layout, **attrs)
    dtype = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info(k, dtype[v.dtype], list(v.shape)) for k, v in feed.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), feed, outs


def _assert_gradgen_gives(want: dict, model, feed: dict, outs: list[str]) -> None:
    """The model imported and run by gradgen gives ``want`` (ONNX Runtime's outputs, float32)."""
    from gradgen.framework import import_onnx
    main, params, names = import_onnx(model)
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    got = Executor().run(main, feed=feed, fetch_list=[names[o] for o in outs], scope=scope)
    for o, g in zip(outs, got):
        np.testing.assert_allclose(g, want[o], rtol=1e-5, atol=1e-6, err_msg=o)


CASES = [(cell, d, layout, lens, initial) for cell in ("LSTM", "GRU") for d in ("forward", "reverse", "bidirectional")
         for layout, lens, initial in [(0, False, False), (0, True, True), (1, True, True), (1, False, True)]]


@pytest.mark.parametrize("cell,direction,layout,lens,initial", CASES)
def test_gradgen_equals_onnx_runtime(cell, direction, layout, lens, initial):
    extra = {"linear_before_reset": 1} if cell == "GRU" and layout else {}
    model, feed, outs = _model(cell, direction, layout, lens, initial, **extra)
    want = run_ort(*_model(cell, direction, 0, lens, initial, **extra)[:2])
    if layout:  # Y [T, dirs, N, H] -> [N, T, dirs, H]; the states [dirs, N, H] -> [N, dirs, H]
        want = {o: v.transpose(2, 0, 1, 3) if o == "Y" else v.transpose(1, 0, 2) for o, v in want.items()}
    _assert_gradgen_gives(want, model, feed, outs)


ACTIVATION_CASES = [  # cell, direction, attrs; alphas/betas go to the activations that read them, in order
    ("LSTM", "bidirectional", {"activations": ["HardSigmoid", "Softsign", "Elu", "Sigmoid", "ScaledTanh", "LeakyRelu"],
                               "activation_alpha": [0.3, 0.8, 1.4], "activation_beta": [0.45, 0.6]}),  # LeakyRelu: 0.01
    ("GRU", "bidirectional", {"activations": ["Affine", "Relu", "Softplus", "ThresholdedRelu"],
                              "activation_alpha": [0.5, 0.2], "activation_beta": [0.1], "linear_before_reset": 1}),
    ("LSTM", "reverse", {"activations": ["Sigmoid", "Tanh", "Relu"]}),
    ("GRU", "forward", {"activations": ["HardSigmoid", "Elu"]}),  # ONNX's defaults 0.2, 0.5 and 1.0
    ("LSTM", "forward", {"activations": ["Affine", "ThresholdedRelu", "Tanh"], "activation_alpha": [0.4, -0.3],
                         "activation_beta": [0.2]}),
    ("GRU", "reverse", {"activations": ["softsign", "scaledtanh"], "activation_alpha": [2.0],
                        "activation_beta": [0.5]}),  # names in any case, as ONNX Runtime takes them
]


@pytest.mark.parametrize("cell,direction,attrs", ACTIVATION_CASES, ids=lambda v: "+".join(v["activations"])
                         if isinstance(v, dict) else str(v))
def test_activations_equal_onnx_runtime(cell, direction, attrs):
    model, feed, outs = _model(cell, direction, 0, True, True, **attrs)
    want = run_ort(model, feed)
    _assert_gradgen_gives(want, model, feed, outs)


@pytest.mark.parametrize("attrs,reason", [({"clip": 1.0}, "clip"), ({"input_forget": 1}, "input_forget"),
                                          ({"activations": ["Gelu", "Tanh", "Tanh"]}, "activations"),
                                          ({"activations": ["Relu", "Tanh"]}, "activations"),
                                          ({"activations": ["LeakyRelu", "Tanh", "Tanh"], "activation_alpha": [-0.1]},
                                           "alpha")])
def test_what_is_not_supported_is_refused_by_name(attrs, reason):
    from gradgen.framework import import_onnx
    from gradgen.framework.tools.onnx.errors import OnnxImportError
    model, _, _ = _model("LSTM", "forward", 0, False, False, **attrs)
    with pytest.raises(OnnxImportError, match=reason):
        import_onnx(model)
