"""PyTorch models with batch norm, exported in training mode and imported as they come (a PyTorch export takes
PyTorch's unbiased running-variance rule), fine-tune as PyTorch does: over five SGD steps on fresh batches the
outputs, every parameter's gradient, the parameters and every running mean and variance equal PyTorch's after
each step, in float32 and float64 to the importer's STEP_TOL (1e-5, 1e-10; the issue asks 1e-4, 1e-7) (a CNN
with ``BatchNorm2d``, an MLP with ``BatchNorm1d``). Imported with ONNX's population rule
(``bn_running_variance="population"``) the running variances drift from PyTorch's by n/(n - 1) in the new term."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.onnx.torch_models import STEP_TOL, Imported, assert_near, export, torch

STEPS, LR, MOMENTUM = 5, 0.05, 0.3  # a large momentum (PyTorch's: the new value's weight) shows drift sooner


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4, momentum=MOMENTUM)
        self.conv2, self.bn2 = torch.nn.Conv2d(4, 4, 3, stride=2), torch.nn.BatchNorm2d(4, momentum=MOMENTUM)
        self.fc = torch.nn.Linear(4 * 2 * 2, 3)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return self.fc(torch.relu(self.bn2(self.conv2(h))).flatten(1))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn1 = torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8, momentum=MOMENTUM)
        self.fc2, self.bn2 = torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8, momentum=MOMENTUM)
        self.fc3 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc3(torch.relu(self.bn2(self.fc2(torch.relu(self.bn1(self.fc1(x)))))))


MODELS = {"cnn": (ConvNet, (3, 3, 5, 5)), "mlp": (MLP, (5, 6))}


def _setup(name: str, dtype: str):
    """The module in training mode (running statistics moved off their initial values), its training-mode
    ONNX export, and the batches of the steps."""
    torch.manual_seed(0)
    make, shape = MODELS[name]
    tdtype = getattr(torch, dtype)
    module = make().to(tdtype).train()
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-1.0, 1.0)
                m.running_var.uniform_(0.5, 2.0)
    batches = [torch.randn(shape, dtype=tdtype) * 2 + 0.5 for _ in range(STEPS)]
    model = export(module, (batches[0],), training=torch.onnx.TrainingMode.TRAINING, input_names=["x"])
    return module, model, batches


def _running_stats(imported: Imported) -> list[str]:
    """The persistable vars the imported batch_norm ops update, in program order (named like PyTorch's buffers)."""
    ops = [op for op in imported.program.global_block().ops if op.type == "batch_norm"]
    return [name for op in ops for name in (op.input("Mean")[0], op.input("Variance")[0])]


def _fine_tune(name: str, dtype: str, **options):
    """Five SGD steps of PyTorch and of the import side by side; yields (step, what, gradgen's, PyTorch's),
    copies (both sides update their arrays in place)."""
    module, model, batches = _setup(name, dtype)
    imported = Imported(model, lr=LR, **options)
    buffers, params = dict(module.named_buffers()), dict(module.named_parameters())
    stats = _running_stats(imported)
    assert len(stats) == 4 and set(stats) <= set(buffers), stats
    assert sorted(v.name for v in imported.trainable) == sorted(params), "every parameter imported as one"
    sgd = torch.optim.SGD(module.parameters(), lr=LR)
    rng = np.random.default_rng(1)
    for step, x in enumerate(batches):
        sgd.zero_grad()
        out = module(x)
        r = rng.standard_normal(tuple(out.shape)).astype(dtype)
        (out * torch.from_numpy(r)).sum().backward()
        grads = {k: p.grad.numpy().copy() for k, p in params.items()}
        sgd.step()
        fetched = imported.run({"x": x.numpy()}, r, [imported.out_name] + imported.grads)
        yield step, "output", fetched[0], out.detach().numpy()
        for var, grad in zip(imported.trainable, fetched[1:]):
            yield step, f"d loss / d {var.name}", grad, grads[var.name]
        for pname, value in params.items():
            yield step, pname, np.array(imported.scope[pname]), value.detach().numpy().copy()
        for sname in stats:
            yield step, sname, np.array(imported.scope[sname]), buffers[sname].numpy().copy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_five_sgd_steps_of_a_pytorch_export_match_pytorch_step_by_step(name, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rule follows the producer: nothing to warn about
        steps = list(_fine_tune(name, dtype))
    stats = {what for _, what, _, _ in steps if what.endswith(("running_mean", "running_var"))}
    assert stats == {f"bn{k}.running_{s}" for k in (1, 2) for s in ("mean", "var")}
    for step, what, got, want in steps:
        assert_near(got, want, dtype, f"{what} after step {step + 1}", STEP_TOL)


def test_with_onnxs_population_rule_the_running_variances_drift_from_pytorch():
    """The check above is sensitive: imported with ONNX's rule everything else still matches, but the running
    variances do not (and nothing warns: the rule was asked for)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        steps = list(_fine_tune("mlp", "float64", bn_running_variance="population"))
    drift = {}
    for step, what, got, want in steps:
        if what.endswith("running_var"):
            drift[what] = max(drift.get(what, 0.0), float(np.abs(got - want).max()))
        else:
            assert_near(got, want, "float64", f"{what} after step {step + 1}", STEP_TOL)
    assert sorted(drift) == ["bn1.running_var", "bn2.running_var"]
    assert all(d > 1e-3 for d in drift.values()), drift


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_inference_export_keeps_the_running_statistics_out_of_the_trainable_parameters(name):
    """As PyTorch's buffers, and as in a training-mode import: batch_norm has no gradient for them, so left
    trainable they would be parameters without a gradient (``gradients`` of all trainable ones gives None)."""
    module, _, batches = _setup(name, "float64")
    with torch.no_grad():  # scales and shifts that differ (the exporter merges equal initializers into one)
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    imported = Imported(export(module.eval(), (batches[0],), input_names=["x"]))
    assert sorted(v.name for v in imported.trainable) == sorted(dict(module.named_parameters()))
    stats = [n for op in imported.program.global_block().ops if op.type == "batch_norm"
             for n in (op.input("Mean")[0], op.input("Variance")[0])]
    assert sorted(stats) == sorted(k for k in dict(module.named_buffers()) if k.endswith(("_mean", "_var")))
    assert all(g is not None for g in imported.grads), "a gradient for every trainable parameter"
    out = module(batches[0])
    r = np.random.default_rng(0).standard_normal(tuple(out.shape))
    (out * torch.from_numpy(r)).sum().backward()
    fetched = imported.run({"x": batches[0].numpy()}, r, [imported.out_name, *imported.grads])
    assert_near(fetched[0], out.detach().numpy(), "float64", "output")
    for var, grad in zip(imported.trainable, fetched[1:]):
        assert_near(grad, dict(module.named_parameters())[var.name].grad.numpy(), "float64", f"d loss / d {var.name}")
