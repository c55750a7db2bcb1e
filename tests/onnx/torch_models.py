"""What the tests of PyTorch-exported models share: export a torch module to ONNX, import it, and compare
gradgen's forward, gradients and SGD steps with PyTorch's own (torch is the ``oracle`` extra, test-only)."""
from __future__ import annotations

import io
import warnings

import numpy as np

from gradgen.framework import Executor, Scope, gradients, optimizer
from gradgen.framework.tools.onnx import import_onnx
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import require

__all__ = ["torch", "export", "widened_to_float64", "Imported", "assert_near", "TOL", "STEP_TOL"]

torch = require("torch")

TOL = {"float32": 1e-5, "float64": 1e-12}
"""The agreement with PyTorch the importer promises in outputs and gradients, relative to the largest magnitude
compared."""
STEP_TOL = {"float32": 1e-5, "float64": 1e-10}
"""The agreement of parameters after a few SGD steps (round-off of each step accumulates)."""


def export(module, args: tuple, **options) -> bytes:
    """``module`` as ONNX opset 17 bytes, exported by TorchScript tracing (no onnxscript needed), nothing folded
    by the exporter: the shape arithmetic stays in the graph, for the importer to fold."""
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, opset_version=17, dynamo=False, do_constant_folding=False, **options)
    return f.getvalue()


def widened_to_float64(model: bytes) -> bytes:
    """A float32 export as the float64 model it stands for: every float32 initializer, constant (a tensor attr),
    declared type and ``Cast`` target made float64. For models PyTorch's exporter will not write in float64
    (it refuses a float64 attention mask); the values a float32 model holds are exact in float64, so the
    widened model is the float64 module's when that module holds the same (upcast) parameters."""
    import onnx
    from onnx import AttributeProto, TensorProto, numpy_helper

    proto = onnx.load_from_string(model)
    graph = proto.graph
    if any(n.op_type in ("If", "Loop", "Scan") for n in graph.node):
        raise ValueError("subgraphs are not widened")

    def widen(t) -> None:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    for t in graph.initializer:
        widen(t)
    for v in [*graph.input, *graph.output, *graph.value_info]:
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in graph.node:
        for a in node.attribute:
            if a.type == AttributeProto.TENSOR:
                widen(a.t)
            elif node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    return proto.SerializeToString()


def assert_near(got, want, dtype: str, what: str, tol: dict = TOL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}")
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0.0))
    assert err <= tol[dtype] * scale, f"{what}: off by {err:.3g} (scale {scale:.3g}, tolerance {tol[dtype]})"


class Imported:
    """An imported model (``import_onnx``'s ``options``) with a loss ``sum(output * R)`` (R fed) appended, its
    parameters' gradients (``grads``, in the order of ``trainable``), and optionally SGD updates, run on
    ``backend``."""

    def __init__(self, model: bytes, lr: float | None = None, backend: str = "numpy", **options):
        self.program, self.params, outputs = import_onnx(model, **options)
        (self.out_name,) = outputs.values()
        startup = Program()
        with program_guard(self.program, startup):
            block = self.program.global_block()
            out = block.var(self.out_name)
            self.r = layers.data("loss_weights", list(out.shape), out.dtype)
            self.loss = layers.reduce_sum(layers.multiply(out, self.r))
            self.trainable = [v for v in block.vars.values() if v.is_parameter and v.trainable]
            if lr is None:
                self.grads = gradients(self.loss, self.trainable)
            else:
                _, params_grads = optimizer.SGD(lr).minimize(self.loss, self.trainable)
                self.trainable, self.grads = [p for p, _ in params_grads], [g.name for _, g in params_grads]
        self.scope = Scope()
        for name, value in self.params.items():
            self.scope.set(name, value)
        self.exe = Executor(backend=backend)
        self.exe.run(startup, scope=self.scope)

    def run(self, feed: dict, r: np.ndarray, fetch: list) -> list:
        return self.exe.run(self.program, feed={**feed, "loss_weights": r}, fetch_list=fetch, scope=self.scope)
