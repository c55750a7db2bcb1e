"""Whole real models exported from PyTorch in the test run (issue 23's proof; the architectures are in
``tests.onnx.real_models``): ResNet-18, MobileNet-V2 (width 0.5), EfficientNet-B0 (an inference export and a
training-mode one), LSTM and GRU text classifiers, an MLP with LayerNorm/GELU/Dropout. Each imports and, in
float32 and float64 (``module.double()`` exported), matches PyTorch over five SGD steps on fresh batches: the
outputs and every parameter's gradient at each step, every parameter (and, in training mode, every running
statistic) after it.

Inference exports are compared with the module in eval mode (batch norm by its running statistics, dropout the
identity). The training-mode EfficientNet is imported as it comes (a PyTorch export takes PyTorch's
running-variance rule) and exported with stochastic depth's drop probability 0: the RandomUniformLike node
stays in the graph (the module draws on every training forward) but keeps every example, so the comparison is
exact; the real drop rate is checked to import and to drop whole examples at its rate. Dropout in a
training-mode export cannot match PyTorch's masks: it is checked to import as gradgen's dropout with the right
rate and scaling.

Tolerances: the importer's own (``STEP_TOL``: 1e-5 in float32, 1e-10 in float64, relative to the largest
magnitude compared), except the training-mode EfficientNet: batch statistics of 8 values per channel make its
training amplify round-off ten- to thirtyfold a step, in PyTorch as in gradgen, so float64 is held to the
issue's 1e-7 and float32 to PyTorch's own float32 accuracy (its own test says how). PyTorch runs on one thread
here: its threads contend on the test machine's two shared cores (ten times slower)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.framework.tools.onnx import import_onnx
from tests.onnx.real_models import MLP, EfficientNetB0, MobileNetV2, ResNet18, StochasticDepth, TextClassifier
from tests.onnx.torch_models import STEP_TOL, Imported, assert_near, export, torch

STEPS, LR = 5, 0.01
ISSUE_TOL = {"float32": 1e-4, "float64": 1e-7}
"""The bound the issue sets, for the models whose conditioning the importer's tighter one does not allow."""


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """PyTorch on one thread: on the test machine's two shared cores its own threads contend (ten times slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _images(shape):
    return lambda dtype: torch.randn(shape, dtype=dtype)


def _tokens(dtype):
    return torch.randint(0, 50, (3, 7))


# name: (module factory, batch factory (given the torch dtype), export in training mode, tolerance, learning rate)
MODELS = {
    "resnet18": (ResNet18, _images((2, 3, 16, 16)), False, STEP_TOL, LR),
    "mobilenet_v2": (lambda: MobileNetV2(width_mult=0.5), _images((2, 3, 32, 32)), False, STEP_TOL, LR),
    "efficientnet_b0": (EfficientNetB0, _images((2, 3, 32, 32)), False, STEP_TOL, LR),
    # batch statistics of 8 values per channel in the last stages (1x1): training amplifies round-off tenfold a
    # step (PyTorch's float32 drifts from its float64 as fast), so the issue's bound, and float32 is held to
    # PyTorch's own float32 accuracy (test_float32_training_...)
    "efficientnet_b0-training": (lambda: EfficientNetB0(drop_rate=0.0), _images((8, 3, 32, 32)), True, ISSUE_TOL,
                                 1e-3),
    "lstm": (lambda: TextClassifier("LSTM"), _tokens, False, STEP_TOL, LR),
    "gru": (lambda: TextClassifier("GRU"), _tokens, False, STEP_TOL, LR),
    "mlp": (MLP, _images((6, 20)), False, STEP_TOL, LR),
    "mlp-training": (lambda: MLP(dropout=0.0), _images((6, 20)), True, STEP_TOL, LR),  # the Dropout node kept
}


def _perturbed(module):
    """``module`` with every parameter moved off its initial value (weights by 10% of themselves, keeping their
    scale; vectors by 0.1) and running statistics off (0, 1): layers initialised alike differ (equal initializers
    the exporter would merge into one), and a wrong use of the statistics shows."""
    with torch.no_grad():
        for p in module.parameters():
            p.mul_(1.0 + 0.1 * torch.randn_like(p)) if p.dim() > 1 else p.add_(0.1 * torch.randn_like(p))
        for m in module.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return module


def _setup(name: str, dtype: str):
    torch.manual_seed(0)
    make, batch, training, _, _ = MODELS[name]
    tdtype = getattr(torch, dtype)
    module = _perturbed(make().to(tdtype)).train(training)
    batches = [batch(tdtype) for _ in range(STEPS)]
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    model = export(module, (batches[0],), input_names=["x"], training=mode)
    return module, model, batches


def _running_stats(imported: Imported) -> list[str]:
    return [name for op in imported.program.global_block().ops if op.type == "batch_norm" and not op.attr("is_test")
            for name in (op.input("Mean")[0], op.input("Variance")[0])]


class _Side:
    """A PyTorch module under SGD, stepped on the batches given, with what the steps compare read out."""

    def __init__(self, module, lr: float):
        self.module, self.sgd = module, torch.optim.SGD(module.parameters(), lr=lr)
        self.params, self.buffers = dict(module.named_parameters()), dict(module.named_buffers())

    def step(self, x, r: np.ndarray) -> dict[str, np.ndarray]:
        """One SGD step; the output, the gradients (``d loss / d name``), then parameters and buffers."""
        self.sgd.zero_grad()
        out = self.module(x)
        (out * torch.from_numpy(r).to(out.dtype)).sum().backward()
        seen = {"output": out.detach().numpy().copy()}
        seen.update({f"d loss / d {k}": p.grad.numpy().copy() for k, p in self.params.items()})
        self.sgd.step()
        seen.update({k: p.detach().numpy().copy() for k, p in self.params.items()})
        seen.update({k: b.numpy().copy() for k, b in self.buffers.items() if k.endswith(("_mean", "_var"))})
        return seen


def _fine_tune(name: str, dtype: str, twin: bool = False):
    """Five SGD steps of PyTorch and of the import side by side, a fresh batch and loss weights each step;
    yields (step, what, gradgen's, PyTorch's, the float64 twin's or None); ``twin``: a float64 copy of the
    module steps alongside on the same (widened) batches."""
    module, model, batches = _setup(name, dtype)
    lr = MODELS[name][4]
    imported = Imported(model, lr=lr)
    torch_side = _Side(module, lr)
    twin_side = _Side(copy.deepcopy(module).double(), lr) if twin else None
    assert sorted(v.name for v in imported.trainable) == sorted(torch_side.params), "every parameter imported"
    stats = _running_stats(imported)
    if stats:  # every running statistic imported, and updated in place
        assert sorted(stats) == sorted(k for k in torch_side.buffers if k.endswith(("running_mean", "running_var")))
    rng, shape = np.random.default_rng(1), imported.program.global_block().var(imported.out_name).shape
    for step, x in enumerate(batches):
        r = rng.standard_normal(shape).astype(dtype)
        want = torch_side.step(x, r)
        truth = twin_side.step(x.double(), r.astype(np.float64)) if twin else {}
        fetched = imported.run({"x": x.numpy()}, r, [imported.out_name] + imported.grads)
        got = {"output": fetched[0], **{f"d loss / d {v.name}": g for v, g in zip(imported.trainable, fetched[1:])}}
        got.update({k: np.array(imported.scope[k]) for k in [*torch_side.params, *stats]})
        for what, value in got.items():
            yield step, what, value, want[what], truth.get(what)


CASES = [(name, dtype) for name in MODELS for dtype in ("float32", "float64")
         if (name, dtype) != ("efficientnet_b0-training", "float32")]


@pytest.mark.parametrize("name,dtype", CASES)
def test_five_sgd_steps_match_pytorch_step_by_step(name, dtype):
    tol = MODELS[name][3]
    seen = set()
    for step, what, got, want, _ in _fine_tune(name, dtype):
        assert_near(got, want, dtype, f"{name}: {what} after step {step + 1}", tol)
        seen.add(what)
    assert "output" in seen and len(seen) > 1


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()), 1.0)


def test_float32_training_of_efficientnet_b0_is_as_accurate_as_pytorchs_own():
    """Its training amplifies round-off ten- to thirtyfold a step (see MODELS): PyTorch's own float32 is 1e-5
    from its float64 after one step and O(1) after four, so two float32 implementations cannot agree to 1e-4
    over five steps, however exact. What holds, and is checked over the three steps where the errors still say
    something: gradgen's float32 is as close to the float64 trajectory (PyTorch's, same model, same batches) as
    PyTorch's float32 is, within a factor 4 (measured: 2.5 at worst), and within the issue's 1e-4 of it at the
    first step."""
    for step, what, got, want, truth in _fine_tune("efficientnet_b0-training", "float32", twin=True):
        if step == 3:
            break
        ours, theirs = _error(got, truth), _error(want, truth)
        assert ours <= 4.0 * theirs + 1e-6, f"{what} after step {step + 1}: {ours:.3g} from float64, PyTorch {theirs:.3g}"
        if step == 0:
            assert_near(got, truth.astype(np.float32), "float32", f"{what} after step 1, to float64's", ISSUE_TOL)


def _training_export(module, x):
    return export(module.train(), (x,), input_names=["x"], training=torch.onnx.TrainingMode.TRAINING)


def test_mlp_dropout_exported_in_training_mode_drops_at_its_rate_and_scales_the_kept():
    torch.manual_seed(0)
    module = MLP(dropout=0.3).double()
    model = _training_export(module, torch.randn(2000, 20, dtype=torch.float64))
    imported = Imported(model)
    (op,) = [op for op in imported.program.global_block().ops if op.type == "dropout"]
    assert op.attr("p") == 0.3 and not op.attr("is_test")
    x = np.random.default_rng(0).standard_normal((2000, 20))
    r = np.ones((2000, 5))
    before, after = imported.run({"x": x}, r, [op.input("X")[0], op.output("Out")[0]])
    kept = after != 0
    assert 0.28 < 1.0 - kept.mean() < 0.32, 1.0 - kept.mean()
    assert (before != 0).all()
    np.testing.assert_allclose(after[kept], before[kept] / 0.7, rtol=1e-15)


def test_stochastic_depth_exported_in_training_mode_drops_whole_examples_at_its_rate():
    torch.manual_seed(0)
    x = torch.rand(4000, 3, 2, 2, dtype=torch.float64) + 1.0
    program, _, outputs = import_onnx(_training_export(StochasticDepth(0.25), x))
    assert "uniform_random" in [op.type for op in program.global_block().ops]
    exe, scope = Executor(), Scope()
    (y,) = exe.run(program, feed={"x": x.numpy()}, fetch_list=list(outputs.values()), scope=scope)
    kept = (y != 0).reshape(4000, -1)
    assert (kept.all(axis=1) | ~kept.any(axis=1)).all(), "an example is dropped whole or kept whole"
    assert 0.23 < 1.0 - kept[:, 0].mean() < 0.27, 1.0 - kept[:, 0].mean()
    np.testing.assert_allclose(y[kept[:, 0]], x.numpy()[kept[:, 0]] / 0.75, rtol=1e-15)
    # the next run (the next training step) drops other examples, as ONNX Runtime's draws would
    (y2,) = exe.run(program, feed={"x": x.numpy()}, fetch_list=list(outputs.values()), scope=scope)
    kept2 = (y2 != 0).reshape(4000, -1)[:, 0]
    assert 0.23 < 1.0 - kept2.mean() < 0.27 and 0.3 < (kept2 != kept[:, 0]).mean() < 0.45


def test_efficientnet_b0_with_its_stochastic_depth_imports_and_trains():
    """The real drop rate (0.2, growing over the blocks): a random node per residual block, and training runs
    (its draws cannot be PyTorch's; the rate is checked on the layer alone above)."""
    torch.manual_seed(0)
    module = _perturbed(EfficientNetB0())
    x = torch.randn(2, 3, 32, 32)
    imported = Imported(_training_export(module, x), lr=LR)
    residuals = sum(isinstance(m, StochasticDepth) for m in module.modules())
    assert [op.type for op in imported.program.global_block().ops].count("uniform_random") == residuals == 9
    before = np.array(imported.scope["classifier.weight"])
    r = np.random.default_rng(0).standard_normal((2, 10)).astype("float32")
    fetched = imported.run({"x": x.numpy()}, r, [imported.out_name] + imported.grads)
    assert all(np.isfinite(f).all() for f in fetched)
    assert not np.array_equal(imported.scope["classifier.weight"], before), "an SGD step moved the classifier"
