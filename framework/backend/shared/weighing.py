"""Which compiled engines ``backend="auto"`` weighs for a program, asked from the program alone (no engine is
imported to answer).

Weighing an engine is not free: its background preparation (torch's import, ~1 s of a core, and its steps'
build) holds the interpreter lock in turns with the numpy runs beside it, and the trial then runs it for blocks
of its own. The torch engine is weighed for its convolutions (oneDNN's), and only where they are large enough to
win: on the anchors' LeNet (15.4 M multiply-adds a step in its convolutions) its step took 2.4 ms against numpy's
4.0; on a digits classifier (8 x 8 images, 0.3 M a step; ``tests/bench/partial_batch.py``) 1.0 ms against
numpy's 0.6 and xla's 0.5, and weighing it cost a 1 s job 3 s. It is weighed for large products too
(``PRODUCT_WORK_FOR_TORCH``), since its products run on torch's threads, and for LSTM layers
(``RECURRENT_FOR_TORCH``). The xla engine is weighed the other way
round: for convolutions up to a size (``CONVOLUTION_WORK_FOR_XLA``). A step that is all large matrix products
(``product_bound``) has no trial at all (``runtime/auto_run.py``): numpy runs each as one BLAS product as the
engines do, and the rest is too little for any engine to gain on, while weighing one would hold its memory for the
rest of the process.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from gradgen.program.ops import OP_SCHEMAS, conv as conv_family
from gradgen.program.subblocks import owned_blocks

__all__ = ["BLAS_DTYPES", "CONVOLUTION_WORK_FOR_TORCH", "CONVOLUTION_WORK_FOR_XLA", "PRODUCT_BOUND_RATIO",
           "PRODUCT_BOUND_WORK", "PRODUCT_WORK_FOR_TORCH", "RECURRENT_FOR_TORCH", "WEIGHED_FOR", "convolution_work",
           "feed_batch", "other_elements", "product_bound", "product_work"]

CONVOLUTION_WORK_FOR_TORCH = 2_000_000
"""Multiply-adds of a step's forward convolutions from which the torch engine is weighed (between the digits
classifier's 0.3 M, where it lost, and LeNet's 15.4 M, where it won)."""


def feed_batch(feed: Mapping[str, Any]) -> int:
    """The largest leading dim among the fed arrays (what a -1 batch dim stands for in this run); 1 if none."""
    return max((value.shape[0] for value in feed.values() if getattr(value, "shape", ())), default=1)


def _run_shape(block, batch: int) -> Callable[[str], tuple[int, ...]]:
    """A var's shape in a run with leading dim ``batch``; ValueError where another dim is unknown."""
    def shape(name: str) -> tuple[int, ...]:
        dims = [batch if (i == 0 and d < 0) else d for i, d in enumerate(block.var(name).shape)]
        if any(d < 0 for d in dims):
            raise ValueError(f"'{name}' has an unknown dim")
        return tuple(dims)
    return shape


def convolution_work(block, batch: int) -> float:
    """Multiply-adds of ``block``'s forward convolutions in one run with leading dim ``batch`` (the conv family's
    own count, ``program.ops.conv.convolution_work``); ``inf`` where a dim other than the leading one is
    unknown."""
    return conv_family.convolution_work(block, _run_shape(block, batch))


def product_work(block, batch: int) -> float:
    """Multiply-adds of ``block``'s matrix products (forward and backward) in one run with leading dim ``batch``
    (the matmul schema's own count); ``inf`` where a dim other than the leading one is unknown."""
    count, shape = OP_SCHEMAS["matmul"].multiply_adds, _run_shape(block, batch)
    try:
        return float(sum(count(op, shape) for op in block.ops if op.type == "matmul"))
    except ValueError:
        return math.inf


def other_elements(block, batch: int) -> float:
    """Elements ``block``'s ops other than matrix products write in one run with leading dim ``batch`` (what the
    elementwise work, which a compiled engine could fuse, is proportional to); ``inf`` where a dim other than the
    leading one is unknown."""
    shape = _run_shape(block, batch)
    try:
        return float(sum(math.prod(shape(name)) for op in block.ops if op.type != "matmul"
                         for name in op.output_arg_names))
    except ValueError:
        return math.inf


PRODUCT_BOUND_WORK = 1_000_000_000
"""Multiply-adds of a step's matrix products from which a step can be all products (``product_bound``): the
50-layer MLP of the anchors' memory bench has 40 G, the large MLP 23 G, the transformer block 3.6 G."""

PRODUCT_BOUND_RATIO = 300
"""Multiply-adds of products per element the other ops write, from which a step is all products. Measured (the
engines side by side in one process, medians, quiet): the 50-layer MLP (499 a element) numpy 713 ms, xla 781,
torch 1,221; the large MLP (834) numpy 444, xla 454, torch 482 (``tests/bench/engine_steps``' programs). The
transformer block is far below (90), and the torch engine runs it fastest."""


BLAS_DTYPES = ("float32", "float64")
"""The dtypes whose products numpy hands to its BLAS."""


def product_bound(block, batch: int) -> str | None:
    """Why ``block`` at leading dim ``batch`` stays on numpy with no compiled engine weighed: its step is large 2-D
    float32 or float64 matrix products, at least ``PRODUCT_BOUND_WORK`` multiply-adds and ``PRODUCT_BOUND_RATIO``
    per element its other ops write, with no convolution and no sub-block; None otherwise (or where a size is
    unknown)."""
    if any(owned_blocks(op) for op in block.ops) or convolution_work(block, batch):
        return None
    products, shape = product_work(block, batch), _run_shape(block, batch)
    if not PRODUCT_BOUND_WORK <= products < math.inf:
        return None
    operands = [op.inputs[slot][0] for op in block.ops if op.type == "matmul" for slot in ("X", "Y")]
    if any(len(shape(name)) != 2 for name in operands):
        return None  # batched products: numpy runs one BLAS call per matrix, an engine may run them as one
    if any(block.var(name).dtype not in BLAS_DTYPES for name in operands):
        return None  # numpy's integer and float16 products are loops of its own, not BLAS
    other = other_elements(block, batch)
    if products < PRODUCT_BOUND_RATIO * other:
        return None
    return (f"no compiled engine is weighed: its step is large matrix products ({products / 1e9:.3g} G "
            f"multiply-adds; its other ops write {other / 1e6:.3g} M elements): each runs as one BLAS product on "
            "every engine, and the rest is too little for a compiled engine to gain on, while weighing one would hold "
            "its memory (backend.shared.weighing)")


CONVOLUTION_WORK_FOR_XLA = 1_000_000_000
"""Multiply-adds of a step's forward convolutions from which the xla engine sits out: XLA's CPU convolutions
(Eigen's) lose more the larger they are. On the anchors' ResNet blocks (4.8 G a step) its step took 236 ms,
numpy's own 155 and the torch engine's 83 (07:22, one interleaved run), and its compile there, in the background,
held the numpy runs beside it at half speed for seconds; on LeNet (15.4 M) it took 3.55 ms against numpy's 4.77,
so it stays weighed below this."""


def _xla_left_out(block, batch: int) -> str | None:
    work = convolution_work(block, batch)
    if work < CONVOLUTION_WORK_FOR_XLA or math.isinf(work):  # unknown: weighed
        return None
    return (f"xla is weighed only for convolutions under {CONVOLUTION_WORK_FOR_XLA / 1e9:g} G multiply-adds a run "
            f"(this program's: {work / 1e9:.2g} G), where XLA's CPU convolutions measured slower than numpy's own "
            f"(backend.shared.weighing)")


PRODUCT_WORK_FOR_TORCH = 500_000_000
"""Multiply-adds of a step's matrix products (forward and backward) from which the torch engine is weighed: its
products run on torch's threads where they measure faster (``backend/torch/kernels/linalg``). On the anchors'
transformer block (3.6 G a step) its step took 117 ms, xla's 138 and numpy's 209 (12:56, one interleaved run);
the seed MLP's products (19 M) and LeNet's fully connected layers (8 M) are far below."""


RECURRENT_FOR_TORCH = ("lstm", "gru")
"""Op types for which the torch engine is weighed at any size: it runs the LSTM on oneDNN's RNN primitive, as
PyTorch's ``nn.LSTM`` does (``backend/torch/kernels/recurrent``), and the GRU on ATen's recurrence with autograd,
as ``nn.GRU`` trains (``kernels/recurrent``). A 50-step LSTM of batch 32, 64 inputs, hidden 128 trained at 9.0 ms a step
there, 31.6 on xla, 42.1 on numpy (PyTorch 8.2; one process, in turns, 2026-12-02); the GRU of those sizes at 22.7
there, 33.2 on xla, 39.0 on numpy (PyTorch 21.6; ``tests.bench.recurrent_layers --cell gru``, 2026-12-02). Since
xla's gradient is the recurrences' shared backward in a reverse scan (``program/ops/recurrence``): the LSTM 10.9 on
torch, 17.1 on xla; the GRU 23.3 on torch, 16.0 on xla (2026-12-02, 15:15), so a GRU's trial takes xla."""


def _torch_left_out(block, batch: int) -> str | None:
    work = convolution_work(block, batch)
    if (work >= CONVOLUTION_WORK_FOR_TORCH or product_work(block, batch) >= PRODUCT_WORK_FOR_TORCH
            or any(op.type in RECURRENT_FOR_TORCH for op in block.ops)):
        return None
    held = f"{work / 1e6:.2g} M" if work else "none"
    return (f"torch is weighed only for convolutions of at least {CONVOLUTION_WORK_FOR_TORCH / 1e6:g} M "
            f"multiply-adds a run (this program's: {held}), products of at least "
            f"{PRODUCT_WORK_FOR_TORCH / 1e6:g} M or an LSTM or GRU layer (backend.shared.weighing)")


WEIGHED_FOR: dict[str, Callable[[Any, int], str | None]] = {"torch": _torch_left_out, "xla": _xla_left_out}
"""Engine -> why a block (at a leading dim) leaves it out of auto's trial, or None when it is weighed. Engines
not named are weighed for every program they can run."""
