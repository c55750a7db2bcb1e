"""Model families from the ``transformers`` library, built from small configs (no download), exported by
PyTorch to ONNX as it does by default (TorchScript, opset 17, eval mode) and in training mode, imported, and
checked against PyTorch on every engine: outputs and every parameter's gradient (float32 and float64), and
five SGD steps.

What each family brings that the importer must get right:

- LLaMA: rotary position embeddings (``x[..., :half]`` and ``x[..., half:]``: slices whose end is INT64_MAX),
  grouped-query attention (2 key/value heads for 4 query heads), RMSNorm, ``sdpa`` attention with a causal and
  a padding mask (``IsNaN`` in the mask's arithmetic).
- T5: relative position buckets (``Abs`` and ``Log`` of int64 distances, ``Min``/``Where`` over int64).
- ConvNeXt V2: global response norm (``torch.norm`` over the spatial dims: ``ReduceL2``), channels-first
  LayerNorm, depthwise 7x7 convolutions.
- BERT, GPT-2 and ViT: post-norm and pre-norm attention with padding and causal masks, patch embeddings.

``transformers`` is in the ``oracle`` extra, test-only, as torch is.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.onnx.runtime import require
from tests.onnx.torch_models import STEP_TOL, TOL, Imported, assert_near, export, torch, widened_to_float64

transformers = require("transformers")

LR, STEPS = 0.05, 5
TOKENS, BATCH, SEQ = 50, 2, 7
ENGINES = ["numpy", "xla"]


def _text_config(cls, **kw):
    return cls(vocab_size=TOKENS, **kw)


FAMILIES = {
    "llama": lambda: transformers.LlamaModel(_text_config(
        transformers.LlamaConfig, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32)),
    "t5": lambda: transformers.T5EncoderModel(_text_config(
        transformers.T5Config, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, dropout_rate=0.0)),
    "convnextv2": lambda: transformers.ConvNextV2Model(transformers.ConvNextV2Config(
        num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], image_size=16, drop_path_rate=0.0)),
    "bert": lambda: transformers.BertModel(_text_config(
        transformers.BertConfig, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), add_pooling_layer=False),
    "gpt2": lambda: transformers.GPT2Model(_text_config(
        transformers.GPT2Config, n_embd=16, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
    "vit": lambda: transformers.ViTModel(transformers.ViTConfig(
        image_size=16, patch_size=4, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), add_pooling_layer=False),
}
IMAGES = ("convnextv2", "vit")
FLOAT32_INSIDE = {
    "llama": "LlamaRMSNorm takes its mean square in float32 whatever the model's dtype",
    "t5": "T5LayerNorm takes its mean square in float32, and the relative position buckets a float32 log",
}
"""Families whose float64 modules compute parts in float32 (an ONNX Cast to float and back in the export): in
float64 they agree with PyTorch to float32's rounding, not float64's."""


class LastHidden(torch.nn.Module):
    """The model's last hidden state, the output every family has."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, attention_mask=None):
        if attention_mask is None:
            return self.model(x).last_hidden_state
        return self.model(input_ids=x, attention_mask=attention_mask).last_hidden_state


def _inputs(family: str, dtype) -> tuple:
    generator = torch.Generator().manual_seed(1)
    if family in IMAGES:
        return (torch.randn(BATCH, 3, 16, 16, generator=generator, dtype=dtype),)
    ids = torch.randint(0, TOKENS, (BATCH, SEQ), generator=generator)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, 5:] = 0  # the second sequence is padded: its last two tokens are masked out
    return ids, mask


def _graph_inputs(model: bytes) -> list[str]:
    import onnx

    graph = onnx.load_from_string(model).graph
    initialized = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in initialized]


_EXPORTS: dict = {}


def _setup(family: str, dtype: str, training: bool = False):
    """The family's module in ``dtype``, its inputs, and its ONNX export (cached per family, dtype and mode).
    A float64 model PyTorch's exporter will not write (a float64 attention mask) is its float32 export widened
    (``widened_to_float64``), checked against the float64 module with the same parameters."""
    torch.manual_seed(0)
    module = LastHidden(FAMILIES[family]())
    with torch.no_grad():  # layers initialised alike would be merged by the exporter; norms start at 1
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    key = (family, dtype, training)
    if key not in _EXPORTS:
        mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
        try:
            _EXPORTS[key] = export(module.to(getattr(torch, dtype)).train(training),
                                   _inputs(family, getattr(torch, dtype)), training=mode)
        except Exception:  # noqa: BLE001 - PyTorch refuses float64 attention masks: export float32, widen
            if dtype != "float64":
                raise
            _EXPORTS[key] = widened_to_float64(export(module.float().train(training),
                                                      _inputs(family, torch.float32), training=mode))
    module = module.to(getattr(torch, dtype)).train()
    return module, _inputs(family, getattr(torch, dtype)), _EXPORTS[key]


def _feed(model: bytes, args: tuple) -> dict:
    return dict(zip(_graph_inputs(model), (a.numpy() for a in args)))


CASES = [(f, d, e) for f in sorted(FAMILIES) for d in ("float32", "float64") for e in ENGINES]


@pytest.mark.parametrize("family,dtype,engine", CASES)
def test_outputs_and_gradients_match_pytorch(family, dtype, engine):
    if engine == "xla":
        require("jax")
    module, args, model = _setup(family, dtype)
    imported = Imported(model, backend=engine)
    out = module(*args)
    r = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
    (out * torch.from_numpy(r)).sum().backward()
    fetched = imported.run(_feed(model, args), r, [imported.out_name] + list(imported.grads))
    tol = TOL["float32"] if family in FLOAT32_INSIDE else TOL[dtype]
    assert_near(fetched[0], out.detach().numpy(), dtype, "output", {dtype: tol})
    # the parameters the output depends on (ConvNeXt's last LayerNorm serves only its pooled output)
    by_name = {k: v for k, v in module.named_parameters() if v.grad is not None}
    assert sorted(v.name for v in imported.trainable) == sorted(by_name), "every parameter imported as one"
    for var, grad in zip(imported.trainable, fetched[1:]):
        assert_near(grad, by_name[var.name].grad.numpy(), dtype, f"d loss / d {var.name}", {dtype: tol})


SGD_CASES = [(f, e, False) for f in sorted(FAMILIES) for e in ENGINES] + [(f, "numpy", True) for f in sorted(FAMILIES)]
"""Every family on every engine from PyTorch's default (eval-mode) export; the training-mode export (the same
graph here: no batch norm, dropout 0) on the reference only, to keep the suite's time."""


@pytest.mark.parametrize("family,engine,training", SGD_CASES,
                         ids=[f"{f}-{e}-{'training' if t else 'eval'}-export" for f, e, t in SGD_CASES])
def test_five_sgd_steps_match_pytorch(family, engine, training):
    if engine == "xla":
        require("jax")
    dtype = "float64"
    module, args, model = _setup(family, dtype, training)
    imported = Imported(model, lr=LR, backend=engine)
    sgd = torch.optim.SGD(module.parameters(), lr=LR)
    out = module(*args)
    r = np.random.default_rng(2).standard_normal(tuple(out.shape)).astype(dtype)
    for _ in range(STEPS):
        sgd.zero_grad()
        (module(*args) * torch.from_numpy(r)).sum().backward()
        sgd.step()
        imported.run(_feed(model, args), r, [])
    tol = STEP_TOL["float32"] if family in FLOAT32_INSIDE else STEP_TOL[dtype]
    trained = {v.name for v in imported.trainable}
    for pname, value in module.named_parameters():
        if value.grad is None:  # no part of the output: not in the export
            assert pname not in trained
            continue
        assert_near(imported.scope[pname], value.detach().numpy(), dtype, f"{pname} after {STEPS} steps", {dtype: tol})
