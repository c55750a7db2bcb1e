"""Model families from the ``transformers`` library, built from small configs (no download), exported by
PyTorch to ONNX as it does by default (TorchScript, opset 17, eval mode) and in training mode, imported, and
checked against PyTorch on every engine (numpy, xla, torch): outputs and every parameter's gradient (float32 and float64), and
five SGD steps.

What each family brings that the importer must get right:

- LLaMA: rotary position embeddings (``x[..., :half]`` and ``x[..., half:]``: slices whose end is INT64_MAX),
  grouped-query attention (2 key/value heads for 4 query heads), RMSNorm, ``sdpa`` attention with a causal and
  a padding mask (``IsNaN`` in the mask's arithmetic).
- Mistral and Qwen2: the same with a separate ``head_dim`` (Mistral) and biases on q/k/v (Qwen2).
- T5: relative position buckets (``Abs`` and ``Log`` of int64 distances, ``Min``/``Where`` over int64).
- ConvNeXt V2: global response norm (``torch.norm`` over the spatial dims: ``ReduceL2``), channels-first
  LayerNorm, depthwise 7x7 convolutions.
- BERT, GPT-2 and ViT: post-norm and pre-norm attention with padding and causal masks, patch embeddings.
- ALBERT: one layer's parameters used by every layer (their gradients summed), a factorized embedding.
- Swin: shifted windows (``torch.roll`` as ``Slice`` and ``Concat``), window partition by reshapes and
  transposes, padding to whole windows, the relative position bias table gathered into an ``sdpa`` float mask,
  patch merging.
- Whisper's encoder: two 1-d convolutions (stride 2), GELU, sinusoidal positions (trained here: the import
  cannot know PyTorch freezes them).
- Wav2Vec2's feature encoder: strided 1-d convolutions on a raw waveform, group norm with a group per channel.
- ResNet, MobileNetV2, EfficientNet and RegNet: batch norm (eval-mode exports against the module in eval mode,
  training-mode exports against it in training mode, with the running statistics after five steps: PyTorch's
  unbiased running-variance rule), max pooling (ResNet), ReLU6 and depthwise convolutions (MobileNetV2), SiLU,
  squeeze-and-excitation and ``ZeroPad2d`` before strided depthwise convolutions (EfficientNet), grouped
  convolutions and squeeze-and-excitation (RegNet Y).

``transformers`` is in the ``oracle`` extra, test-only, as torch is. MobileNetV2 is a slow family (``SLOW``):
``GRADGEN_SLOW_FAMILIES=1`` runs all its cases.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.onnx.runtime import require
from tests.onnx.torch_models import STEP_TOL, TOL, Imported, assert_near, export, torch, widened_to_float64

transformers = require("transformers")

LR, STEPS = 0.05, 5
BATCH_NORM_LR = 2e-4
"""The batch-norm families' step: ResNet in eval mode (no normalization in the forward, ReLU and residuals)
grows its output a hundredfold in three steps of 2e-3 (PyTorch and gradgen alike), and overflows in five."""
TOKENS, BATCH, SEQ = 50, 2, 7
ENGINES = ["numpy", "xla", "torch"]


def _text_config(cls, **kw):
    return cls(vocab_size=TOKENS, **kw)


def _trainable_positions(encoder):
    """Whisper's encoder with its (sinusoidal) position table trainable: the import cannot know that PyTorch
    freezes it, so the table is trained on both sides and its gradient checked too."""
    encoder.embed_positions.weight.requires_grad_(True)
    return encoder


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
    "mistral": lambda: transformers.MistralModel(_text_config(
        transformers.MistralConfig, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=4, max_position_embeddings=32)),
    "qwen2": lambda: transformers.Qwen2Model(_text_config(
        transformers.Qwen2Config, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32)),
    "albert": lambda: transformers.AlbertModel(_text_config(
        transformers.AlbertConfig, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), add_pooling_layer=False),
    # GELU's sqrt(2) would be a float32 constant in the float32 export the float64 model widens (PyTorch refuses
    # Swin's float64 attention mask), off by float32's rounding: ViT and BERT check GELU, SiLU here
    "swin": lambda: transformers.SwinModel(transformers.SwinConfig(
        image_size=16, patch_size=2, embed_dim=8, depths=[1, 1], num_heads=[2, 4], window_size=2, mlp_ratio=2.0,
        hidden_act="silu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0)),
    "whisper": lambda: _trainable_positions(transformers.WhisperModel(transformers.WhisperConfig(
        vocab_size=TOKENS, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        num_mel_bins=MEL_BINS, d_model=16, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=32,
        decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=32, max_source_positions=FRAMES // 2,
        dropout=0.0)).encoder),
    "wav2vec2": lambda: transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
        conv_dim=(8, 8), conv_kernel=(10, 3), conv_stride=(5, 2), feat_extract_norm="group", hidden_size=16,
        num_hidden_layers=1, num_attention_heads=4, intermediate_size=32)).feature_extractor,
    "resnet": lambda: transformers.ResNetModel(transformers.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")),
    "mobilenetv2": lambda: transformers.MobileNetV2Model(transformers.MobileNetV2Config(
        image_size=32, depth_multiplier=0.25, min_depth=4, depth_divisible_by=4), add_pooling_layer=False),
    "efficientnet": lambda: transformers.EfficientNetModel(transformers.EfficientNetConfig(
        image_size=32, width_coefficient=0.125, depth_coefficient=1.0, depth_divisor=4, kernel_sizes=[3, 5],
        in_channels=[32, 16], out_channels=[16, 24], strides=[1, 2], num_block_repeats=[1, 1], expand_ratios=[1, 6],
        hidden_dim=160, drop_connect_rate=0.0, dropout_rate=0.0)),
    "regnet": lambda: transformers.RegNetModel(transformers.RegNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=4, layer_type="y")),
}
MEL_BINS, FRAMES, SAMPLES = 8, 16, 200
INPUTS = {"convnextv2": (3, 16, 16), "vit": (3, 16, 16), "swin": (3, 16, 16), "resnet": (3, 16, 16),
          "regnet": (3, 16, 16), "mobilenetv2": (3, 32, 32), "efficientnet": (3, 32, 32),
          "whisper": (MEL_BINS, FRAMES), "wav2vec2": (SAMPLES,)}
"""The shape of one example of each family that takes floats (images, mel spectrograms, waveforms); the others
take token ids and a padding mask."""
BATCH_NORM = ("efficientnet", "mobilenetv2", "regnet", "resnet")
"""Families with batch norm: their eval-mode export is checked against the module in eval mode (running
statistics), their training-mode export against the module in training mode (batch statistics, and the running
statistics each step moves)."""
TRAINING_EXPORTS = ("efficientnet", "regnet", "resnet")
"""The batch-norm families whose training-mode export is checked. Not MobileNetV2's: its last stages are 1x1, so
batch norm there normalizes two values per channel (+-1 whatever they are) and the model is too ill-conditioned
to compare: a 1e-15 relative change of the input moves PyTorch's own float64 output by 1.7e-9 (gradgen's differs
by 2e-10); at 64x64, its gradients by 4e-12 (gradgen's 2.5e-12, and float32 gradients of scale 2.5e4)."""
TRAINING_FLOAT32_TOL = 1e-4
"""Float32 gradients of a training-mode export (batch statistics of 2 examples of 1x1 to 4x4): held to the issue's
bound, as PyTorch's own float32 gradients are 1.4e-5 from its float64 ones (EfficientNet; gradgen's 1e-5 and
6e-6 on xla and numpy)."""
FLOAT32_INSIDE = {
    "llama": "LlamaRMSNorm takes its mean square in float32 whatever the model's dtype",
    "t5": "T5LayerNorm takes its mean square in float32, and the relative position buckets a float32 log",
    "mistral": "MistralRMSNorm takes its mean square in float32, the rotary embedding's angles are float32",
    "qwen2": "Qwen2RMSNorm takes its mean square in float32, the rotary embedding's angles are float32",
}
"""Families whose float64 modules compute parts in float32 (an ONNX Cast to float and back in the export): in
float64 they agree with PyTorch to float32's rounding, not float64's."""


class LastHidden(torch.nn.Module):
    """The model's last hidden state, the output every family has."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, attention_mask=None):
        out = self.model(x) if attention_mask is None else self.model(input_ids=x, attention_mask=attention_mask)
        return out if torch.is_tensor(out) else out.last_hidden_state  # Wav2Vec2's feature encoder: a tensor


def _inputs(family: str, dtype) -> tuple:
    generator = torch.Generator().manual_seed(1)
    if family in INPUTS:
        return (torch.randn(BATCH, *INPUTS[family], generator=generator, dtype=dtype),)
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
_STATES: dict = {}


def _setup(family: str, dtype: str, training: bool = False):
    """The family's module in ``dtype``, its inputs, and its ONNX export (cached per family, dtype and mode).
    A float64 model PyTorch's exporter will not write (a float64 attention mask) is its float32 export widened
    (``widened_to_float64``), checked against the float64 module with the same parameters. The module is in
    training mode (dropout is 0), a batch-norm family's in the export's mode."""
    torch.manual_seed(0)
    module = LastHidden(FAMILIES[family]())
    with torch.no_grad():  # layers initialised alike would be merged by the exporter; norms start at 1
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for name, b in module.named_buffers():  # running statistics off (0, 1): a wrong use of them shows
            if name.endswith("running_mean"):
                b.uniform_(-0.5, 0.5)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 2.0)
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
        # tracing in training mode runs the module, moving its running statistics: the export holds them moved
        _STATES[key] = {k: v.clone() for k, v in module.named_buffers()}
    module = module.to(getattr(torch, dtype)).train(training or family not in BATCH_NORM)
    module.load_state_dict(_STATES[key], strict=False)  # (after the cast: a float32 buffer would round them)
    return module, _inputs(family, getattr(torch, dtype)), _EXPORTS[key]


def _feed(model: bytes, args: tuple) -> dict:
    return dict(zip(_graph_inputs(model), (a.numpy() for a in args)))


SLOW = ("mobilenetv2",)
"""Families whose cases are a slow run (MobileNetV2's 17 blocks: 33 s for its six cases on the test machine's two
cores), set ``GRADGEN_SLOW_FAMILIES=1`` to run them; the suite runs its float32 outputs and gradients on the
reference."""


def _in_this_run(case: tuple, in_suite: bool) -> bool:
    """Whether ``case`` runs: every case of a family not SLOW; of a SLOW one, those ``in_suite``, and all of them
    with ``GRADGEN_SLOW_FAMILIES=1`` (left out of the suite, not skipped: the suite reports no skips)."""
    return case[0] not in SLOW or in_suite or bool(os.environ.get("GRADGEN_SLOW_FAMILIES"))


CASES = ([(f, d, e, False) for f in sorted(FAMILIES) for d in ("float32", "float64") for e in ENGINES]
         + [(f, d, e, True) for f in TRAINING_EXPORTS for d in ("float32", "float64") for e in ENGINES])
"""Every family's default (eval-mode) export; a batch-norm family's training-mode export too (batch statistics)."""


RUN_CASES = [c for c in CASES if _in_this_run(c, c[1:3] == ("float32", "numpy"))]


@pytest.mark.parametrize("family,dtype,engine,training", RUN_CASES,
                         ids=[f"{f}-{d}-{e}-{'training' if t else 'eval'}-export" for f, d, e, t in RUN_CASES])
def test_outputs_and_gradients_match_pytorch(family, dtype, engine, training):
    if engine == "xla":
        require("jax")
    module, args, model = _setup(family, dtype, training)
    imported = Imported(model, backend=engine)
    out = module(*args)
    r = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
    (out * torch.from_numpy(r)).sum().backward()
    fetched = imported.run(_feed(model, args), r, [imported.out_name] + list(imported.grads))
    tol = TOL["float32"] if family in FLOAT32_INSIDE else TOL[dtype]
    if training and dtype == "float32":
        tol = TRAINING_FLOAT32_TOL
    assert_near(fetched[0], out.detach().numpy(), dtype, "output", {dtype: tol})
    # the parameters the output depends on (ConvNeXt's last LayerNorm serves only its pooled output)
    by_name = {k: v for k, v in module.named_parameters() if v.grad is not None}
    assert sorted(v.name for v in imported.trainable) == sorted(by_name), "every parameter imported as one"
    for var, grad in zip(imported.trainable, fetched[1:]):
        assert_near(grad, by_name[var.name].grad.numpy(), dtype, f"d loss / d {var.name}", {dtype: tol})


SGD_CASES = ([(f, e, False) for f in sorted(FAMILIES) for e in ENGINES]
             + [(f, e, True) for f in sorted(FAMILIES) if f not in BATCH_NORM or f in TRAINING_EXPORTS
                for e in (ENGINES if f in BATCH_NORM else ["numpy"])])
"""Every family on every engine from PyTorch's default (eval-mode) export; the training-mode export on every
engine for the batch-norm families, and on the reference only for the others (the same graph as the eval-mode
one: no batch norm, dropout 0), to keep the suite's time."""


RUN_SGD_CASES = [c for c in SGD_CASES if _in_this_run(c, False)]


@pytest.mark.parametrize("family,engine,training", RUN_SGD_CASES,
                         ids=[f"{f}-{e}-{'training' if t else 'eval'}-export" for f, e, t in RUN_SGD_CASES])
def test_five_sgd_steps_match_pytorch(family, engine, training):
    if engine == "xla":
        require("jax")
    dtype = "float64"
    module, args, model = _setup(family, dtype, training)
    lr = BATCH_NORM_LR if family in BATCH_NORM else LR
    imported = Imported(model, lr=lr, backend=engine)
    sgd = torch.optim.SGD(module.parameters(), lr=lr)
    r = None
    for _ in range(STEPS):  # (each training-mode forward moves the running statistics: one forward a step)
        sgd.zero_grad()
        out = module(*args)
        if r is None:
            r = np.random.default_rng(2).standard_normal(tuple(out.shape)).astype(dtype)
        (out * torch.from_numpy(r)).sum().backward()
        sgd.step()
        imported.run(_feed(model, args), r, [])
    tol = STEP_TOL["float32"] if family in FLOAT32_INSIDE else STEP_TOL[dtype]
    trained = {v.name for v in imported.trainable}
    for pname, value in module.named_parameters():
        if value.grad is None:  # no part of the output: not in the export
            assert pname not in trained
            continue
        assert_near(imported.scope[pname], value.detach().numpy(), dtype, f"{pname} after {STEPS} steps", {dtype: tol})
    stats = {k: b for k, b in module.named_buffers() if k.endswith(("running_mean", "running_var"))}
    assert bool(stats) == (family in BATCH_NORM)
    if training:  # PyTorch's running-variance rule (the unbiased batch variance), taken for a PyTorch export
        updated = {n for op in imported.program.global_block().ops if op.type == "batch_norm"
                   for n in (op.input("Mean")[0], op.input("Variance")[0])}
        assert updated == set(stats), "every running statistic is a persistable var the import updates"
        for name, value in stats.items():
            assert_near(imported.scope[name], value.numpy(), dtype, f"{name} after {STEPS} steps", {dtype: tol})
