"""Issue 23's ops against PyTorch (the ``oracle`` extra): models exported by ``torch.onnx.export`` (opset 17) that
use Trilu, Einsum, Flatten and a full TopK import and compute PyTorch's outputs and gradients; gradgen's einsum
equals ``torch.einsum`` with its gradients. Float32 to 1e-5, float64 to 1e-12."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.framework.tools.onnx.errors import OnnxImportError
from gradgen.program import Program, layers, program_guard
from tests.extras import require
from tests.onnx.runtime import require as require_module

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

TOL = {"float32": 1e-5, "float64": 1e-12}
DTYPES = ["float32", "float64"]


def _torch():
    require(None if torch is not None else "torch", "install the oracle extra (CPU torch)")
    return torch


def _export(module, args, names, batch_dynamic=True):
    """The ONNX model PyTorch's TorchScript exporter writes for ``module`` (opset 17), dim 0 of each input dynamic."""
    require_module("onnx")
    import onnx

    f = io.BytesIO()
    dynamic = {n: {0: "batch"} for n in names} if batch_dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, opset_version=17, dynamo=False, input_names=list(names),
                          dynamic_axes=dynamic)
    return onnx.load_from_string(f.getvalue())


def _import_and_compare(module, inputs: dict, dtype: str, batch_dynamic=True):
    """Import ``module``'s export; its first output, and the gradients of sum(out * r) for every input, must equal
    PyTorch's. Returns the imported program (for checks on its ops)."""
    from gradgen.framework import import_onnx

    tensors = {n: torch.tensor(v, requires_grad=True) for n, v in inputs.items()}
    model = _export(module, tuple(tensors.values()), list(inputs), batch_dynamic)
    want = module(*tensors.values())
    want = want[0] if isinstance(want, tuple) else want
    r = np.random.default_rng(3).standard_normal(tuple(want.shape)).astype(dtype)
    want_grads = torch.autograd.grad((want * torch.tensor(r)).sum(), list(tensors.values()))

    program, params, outputs = import_onnx(model)
    block = program.global_block()
    out = block.var(next(iter(outputs.values())))
    xs = [block.var(n) for n in inputs]
    for x in xs:
        x.stop_gradient = False
    with program_guard(program, Program()):
        rv = layers.data("r@weights", list(out.shape), dtype)
        grads = gradients(layers.reduce_sum(out * rv), xs)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    got = Executor(check_types=True).run(program, feed={**inputs, "r@weights": r}, fetch_list=[out, *grads],
                                         scope=scope)
    tol = TOL[dtype]
    assert got[0].dtype == np.dtype(dtype)
    np.testing.assert_allclose(got[0], want.detach().numpy(), rtol=tol, atol=tol)
    for name, g, w in zip(inputs, got[1:], want_grads):
        np.testing.assert_allclose(g, w.numpy(), rtol=tol, atol=tol, err_msg=f"d/d {name}")
    return program


def _causal_attention_module():
    class CausalAttention(torch.nn.Module):
        """Attention masked by tril/triu of the scores themselves (so the Trilu nodes survive export); the scale is
        a constant (``q.shape[-1] ** 0.5`` exports shape arithmetic that needs import-time constant folding)."""

        def forward(self, q, k, v):
            scores = q @ k.transpose(-2, -1) * 0.5
            masked = torch.tril(scores) + torch.triu(torch.full_like(scores, -1e9), diagonal=1)
            return torch.softmax(masked, dim=-1) @ v

    return CausalAttention()


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_attention_built_with_trilu_imports_and_matches_torch(dtype):
    _torch()
    rng = np.random.default_rng(1)
    qkv = {n: rng.standard_normal((2, 2, 5, 4)).astype(dtype) for n in "qkv"}
    program = _import_and_compare(_causal_attention_module(), qkv, dtype)
    types = [op.type for op in program.global_block().ops]
    assert "tril" in types and "triu" in types


@pytest.mark.parametrize("batch_dynamic", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_dot_product_attention_is_causal_imports_and_matches_torch(dtype, batch_dynamic):
    _torch()

    class SDPA(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    rng = np.random.default_rng(2)
    qkv = {n: rng.standard_normal((2, 2, 5, 4)).astype(dtype) for n in "qkv"}
    _import_and_compare(SDPA(), qkv, dtype, batch_dynamic)


@pytest.mark.parametrize("dtype", DTYPES)
def test_einsum_sort_and_flatten_exported_by_torch_import_and_match_it(dtype):
    """Einsum as gradgen's einsum; TopK with K = x.size(1) as a full sort (values and the gradient through it);
    Flatten as flatten."""
    _torch()

    class Mixed(torch.nn.Module):
        def forward(self, x, y):
            product = torch.einsum("bij,bjk->bik", x, y)
            ranked = torch.sort(product, dim=1, descending=True)[0]
            return torch.flatten(ranked * torch.einsum("...ij->...j", x).unsqueeze(-1).sum(1, keepdim=True), 1)

    rng = np.random.default_rng(4)
    inputs = {"x": rng.standard_normal((2, 3, 4)).astype(dtype), "y": rng.standard_normal((2, 4, 5)).astype(dtype)}
    program = _import_and_compare(Mixed(), inputs, dtype)
    types = [op.type for op in program.global_block().ops]
    assert {"einsum", "sort", "flatten"} <= set(types) and "top_k" not in types


EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize("equation,shapes", EQUATIONS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_einsum_equals_torch_einsum_with_gradients(equation, shapes, dtype):
    _torch()
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = torch.einsum(equation, *tensors)
    r = rng.standard_normal(tuple(want.shape)).astype(dtype)
    want_grads = torch.autograd.grad((want * torch.tensor(r)).sum(), tensors)
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(f"x{k}", [-1] + list(s[1:]) if s else [], dtype) for k, s in enumerate(shapes)]
        out = layers.einsum(equation, *xs)
        rv = layers.data("r", list(out.shape), dtype)
        grads = gradients(layers.reduce_sum(out * rv), xs)
    feed = {**{f"x{k}": a for k, a in enumerate(arrays)}, "r": r}
    got = Executor(check_types=True).run(main, feed=feed, fetch_list=[out, *grads])
    tol = TOL[dtype]
    np.testing.assert_allclose(got[0], want.detach().numpy(), rtol=tol, atol=tol)
    for k, (g, w) in enumerate(zip(got[1:], want_grads)):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g, w.numpy(), rtol=tol, atol=tol, err_msg=f"d/d operand {k}")
