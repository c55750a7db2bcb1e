"""PyTorch's transformers through ONNX: a bare ``nn.MultiheadAttention`` and a two-layer ``nn.TransformerEncoder``
(no mask, a key padding mask, an attention mask), exported by PyTorch at opset 17, import (their shape
arithmetic, ``Mod`` included, folds at import) and match PyTorch in outputs, in every parameter's gradient,
and over five SGD steps, in float32 and float64. PyTorch's exporter refuses a float64 attention mask
("Unsupported type for attn_mask: 7": ``multi_head_attention_forward`` turns even a bool mask into one of the
query's dtype), so the masked encoders' float64 models are their float32 exports widened to float64
(``widened_to_float64``), checked against the float64 module with the same parameters."""
from __future__ import annotations

import numpy as np
import pytest

from tests.onnx.torch_models import STEP_TOL, Imported, assert_near, export, torch, widened_to_float64

BATCH, SEQ, EMBED, HEADS = 2, 5, 8, 2
STEPS, LR = 5, 0.05


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(EMBED, HEADS, batch_first=True)

    def forward(self, q):
        return self.attn(q, q, q, need_weights=False)[0]


class Encoder(torch.nn.Module):
    """Two encoder layers; ``mask`` says which mask forward takes as its second input, if any."""

    def __init__(self, mask: str | None):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(EMBED, HEADS, 16, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.mask = mask

    def forward(self, x, *mask):
        if self.mask == "padding":
            return self.encoder(x, src_key_padding_mask=mask[0])
        if self.mask == "window":
            return self.encoder(x, mask=mask[0])
        return self.encoder(x)


def _inputs(mask: str | None, dtype) -> tuple:
    x = torch.randn(BATCH, SEQ, EMBED, dtype=dtype)
    if mask == "padding":
        padding = torch.zeros(BATCH, SEQ, dtype=torch.bool)
        padding[0, 3:] = True
        return x, padding
    if mask == "window":  # each position sees its neighbours within 1 (not causal: PyTorch exports that as Trilu)
        steps = torch.arange(SEQ)
        return x, (steps[:, None] - steps[None, :]).abs() > 1
    return (x,)


MODELS = {"attention": (Attention, None), "encoder": (Encoder, None), "encoder-padding": (Encoder, "padding"),
          "encoder-window": (Encoder, "window")}


def _setup(name: str, dtype: str):
    torch.manual_seed(0)
    make, mask = MODELS[name]
    exported = "float32" if mask else dtype  # a float64 mask cannot be exported: widened after (module doc)
    module = (make() if make is Attention else make(mask)).to(getattr(torch, exported))
    with torch.no_grad():  # layers cloned from one another differ (equal ones the exporter would merge into one)
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    args = _inputs(mask, getattr(torch, exported))
    module.eval()
    model = export(module, args)
    if exported != dtype:
        model, module = widened_to_float64(model), module.double()
        args = tuple(a.double() if a.is_floating_point() else a for a in args)
    module.train()  # dropout is 0: the same function, on the path that differentiates
    return module, args, model


def _graph_inputs(model: bytes) -> list[str]:
    import onnx

    graph = onnx.load_from_string(model).graph
    initialized = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in initialized]


CASES = [(name, dtype) for name in sorted(MODELS) for dtype in ("float32", "float64")]


@pytest.mark.parametrize("name,dtype", CASES)
def test_outputs_and_gradients_match_pytorch(name, dtype):
    module, args, model = _setup(name, dtype)
    imported = Imported(model)
    feed = dict(zip(_graph_inputs(model), (a.numpy() for a in args)))
    out = module(*args)
    r = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
    (out * torch.from_numpy(r)).sum().backward()
    fetched = imported.run(feed, r, [imported.out_name] + [g for g in imported.grads])
    assert_near(fetched[0], out.detach().numpy(), dtype, "output")
    by_name = dict(module.named_parameters())
    assert sorted(v.name for v in imported.trainable) == sorted(by_name), "every parameter imported as one"
    for var, grad in zip(imported.trainable, fetched[1:]):
        assert_near(grad, by_name[var.name].grad.numpy(), dtype, f"d loss / d {var.name}")


@pytest.mark.parametrize("name,dtype", [("encoder", "float64"), ("encoder-padding", "float32"),
                                        ("encoder-padding", "float64")])
def test_five_sgd_steps_match_pytorch(name, dtype):
    module, args, model = _setup(name, dtype)
    imported = Imported(model, lr=LR)
    feed = dict(zip(_graph_inputs(model), (a.numpy() for a in args)))
    sgd = torch.optim.SGD(module.parameters(), lr=LR)
    r = np.random.default_rng(2).standard_normal((BATCH, SEQ, EMBED)).astype(dtype)
    for _ in range(STEPS):
        sgd.zero_grad()
        (module(*args) * torch.from_numpy(r)).sum().backward()
        sgd.step()
        imported.run(feed, r, [])
    for pname, value in dict(module.named_parameters()).items():
        assert_near(imported.scope[pname], value.detach().numpy(), dtype, f"{pname} after {STEPS} steps", STEP_TOL)


def test_attention_exported_with_a_dynamic_batch_runs_at_any_batch_size_as_pytorch_does():
    torch.manual_seed(0)
    module = Attention().double()
    model = export(module.eval(), (torch.randn(2, SEQ, EMBED, dtype=torch.float64),), input_names=["q"],
                   dynamic_axes={"q": {0: "batch"}})
    imported = Imported(model)
    assert imported.program.global_block().var("q").shape == (-1, SEQ, EMBED)
    module.train()
    for batch in (1, 3):
        q = torch.randn(batch, SEQ, EMBED, dtype=torch.float64)
        module.zero_grad()
        out = module(q)
        r = np.random.default_rng(batch).standard_normal(tuple(out.shape))
        (out * torch.from_numpy(r)).sum().backward()
        fetched = imported.run({"q": q.numpy()}, r, [imported.out_name] + list(imported.grads))
        assert_near(fetched[0], out.detach().numpy(), "float64", f"output at batch {batch}")
        for var, grad in zip(imported.trainable, fetched[1:]):
            assert_near(grad, dict(module.named_parameters())[var.name].grad.numpy(), "float64",
                        f"d loss / d {var.name} at batch {batch}")
