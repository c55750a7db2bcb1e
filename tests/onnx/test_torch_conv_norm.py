"""1-D and 3-D convolutions, their transposes, (dilated) pooling, GroupNorm and InstanceNorm exported by
``torch.onnx.export`` (opset 17) import, and match PyTorch in float64: outputs, and the gradients of a weighted
sum of the output in the input and every parameter.

torch is the test-only oracle (the ``oracle`` extra); without it the check is skipped, and fails under
``GRADGEN_REQUIRE_EXTRAS``. PyTorch exports GroupNorm at opset 17 as Reshape, InstanceNormalization (over the
groups), Reshape, Mul and Add. Ceil-mode average pooling that counts padding divides a last window reaching past
the padding by its taps inside the padded input (not its area): the importer rescales gradgen's exclusive average.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.program import program_guard
from tests.extras import require

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

MODULES = {  # name -> (module factory, input shape)
    "conv1d": (lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    "conv1d_groups_dilated": (lambda: torch.nn.Conv1d(4, 2, 2, padding=2, dilation=3, groups=2, bias=False),
                              (1, 4, 7)),
    "conv3d": (lambda: torch.nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2)),
               (2, 2, 3, 5, 4)),
    "conv_transpose1d": (lambda: torch.nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1),
                         (2, 3, 4)),
    "conv_transpose3d": (lambda: torch.nn.ConvTranspose3d(2, 4, 2, stride=(2, 1, 2), groups=2), (1, 2, 2, 3, 2)),
    "max_pool1d_dilated": (lambda: torch.nn.MaxPool1d(3, stride=2, padding=1, dilation=2), (2, 3, 10)),
    "max_pool3d": (lambda: torch.nn.MaxPool3d(2, stride=(1, 2, 2), padding=(1, 0, 1)), (1, 2, 3, 4, 5)),
    "max_pool3d_dilated": (lambda: torch.nn.MaxPool3d((2, 2, 1), stride=1, dilation=(2, 1, 1)), (1, 2, 4, 3, 3)),
    "avg_pool3d": (lambda: torch.nn.AvgPool3d(2, stride=1, padding=1), (1, 2, 3, 2, 4)),
    "avg_pool3d_exclusive": (lambda: torch.nn.AvgPool3d((3, 2, 2), stride=2, padding=1, count_include_pad=False),
                             (2, 1, 4, 4, 3)),
    "avg_pool1d_ceil": (lambda: torch.nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 8)),
    "avg_pool2d_ceil": (lambda: torch.nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 5)),
    "max_pool3d_ceil_dilated": (lambda: torch.nn.MaxPool3d(2, stride=2, padding=1, dilation=(2, 1, 1),
                                                           ceil_mode=True), (1, 1, 6, 5, 5)),
    "group_norm": (lambda: torch.nn.GroupNorm(2, 4), (2, 4, 3, 5)),
    "group_norm_3d": (lambda: torch.nn.GroupNorm(3, 6), (1, 6, 2, 2, 3)),
    "instance_norm1d": (lambda: torch.nn.InstanceNorm1d(3, affine=True), (2, 3, 6)),
    "instance_norm3d": (lambda: torch.nn.InstanceNorm3d(2, affine=True), (2, 2, 3, 2, 2)),
}


def _module(name: str):
    factory, shape = MODULES[name]
    torch.manual_seed(0)
    module = factory().double()
    with torch.no_grad():
        for p in module.parameters():  # not the default ones and zeros of the norms' affine parameters
            p.copy_(torch.randn_like(p))
    rng = np.random.default_rng(1)
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) / np.prod(shape)  # no ties
    return module, x


@pytest.mark.filterwarnings("ignore")  # the TorchScript exporter's deprecation and tracer warnings
@pytest.mark.parametrize("name", list(MODULES))
def test_torch_export_imports_and_matches_outputs_and_gradients(name):
    require(None if torch is not None else "torch", "pip install -e '.[oracle]'")
    require(None if _has("onnx") else "onnx", "pip install -e '.[onnx]'")
    from gradgen.framework import import_onnx

    module, x = _module(name)
    buffer = io.BytesIO()
    torch.onnx.export(module, (torch.from_numpy(x),), buffer, opset_version=17, dynamo=False, input_names=["x"],
                      output_names=["y"], do_constant_folding=False)
    program, params, outputs = import_onnx(buffer.getvalue())

    xt = torch.from_numpy(x).requires_grad_()
    want = module(xt)
    r = np.random.default_rng(2).standard_normal(tuple(want.shape))
    torch_grads = torch.autograd.grad((want * torch.from_numpy(r)).sum(), [xt, *module.parameters()])
    named = dict(zip(["x"] + [n for n, _ in module.named_parameters()], torch_grads))

    block = program.global_block()
    with program_guard(program):
        y = block.var(outputs["y"])
        weights = block.create_var("r@weights", list(r.shape), "float64")
        loss = block.append_op("elementwise_mul", {"X": [y.name], "Y": [weights.name]}, {"Out": ["r@weighted"]})
        loss = block.append_op("reduce_sum", {"X": ["r@weighted"]}, {"Out": ["r@loss"]}, {"reduce_all": True})
        wrt = [block.var("x")] + [block.var(n) for n in named if n != "x"]
        grads = gradients(block.var("r@loss"), wrt)
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    got = Executor().run(program, feed={"x": x, "r@weights": r}, fetch_list=[y] + grads, scope=scope)
    np.testing.assert_allclose(got[0], want.detach().numpy(), rtol=1e-10, atol=1e-10, err_msg="output")
    for v, g in zip(wrt, got[1:]):
        np.testing.assert_allclose(g, named[v.name].numpy(), rtol=1e-10, atol=1e-10, err_msg=f"d loss / d {v.name}")


def _has(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False
