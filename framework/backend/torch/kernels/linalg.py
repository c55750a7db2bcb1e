"""The matrix product in the torch engine (``numpy/kernels/linalg.py``): on torch's own product (MKL, on torch's
intra-op threads) or on numpy's BLAS over views of the tensors, whichever measures faster in this process at the
run's thread count (``torch_is_faster``); numpy's where a value is not finite or the dtype is not float32/64."""
from __future__ import annotations

import math
import threading
import time

import numpy as np
import torch

from gradgen.program.shapes import broadcast_shapes

from ...shared.one_time import one_time
from .finite import all_finite, known_finite, remembered

__all__ = ["KERNELS", "torch_is_faster"]

_TORCH_DTYPES = (torch.float32, torch.float64)
"""The dtypes torch's product may take (numpy's keeps integers and float16 as the reference computes them)."""

_CALIBRATION_SHAPE = (1024, 256, 256)
"""(m, k, n) of the product both are timed on: a transformer projection's rows, big enough that threads count."""

_faster: dict[int, bool] = {}
_lock = threading.Lock()


_POOLS_SETTLE_SECONDS = 0.15
"""How long the calibration waits before it times anything: numpy's OpenBLAS threads spin about 0.1 s after a
product at two threads (the numpy runs just before, in ``backend="auto"``'s trial), and torch's product timed on the
core they hold took twice as long. Measured: calibrated right after five such products, 2 of 6 calibrations chose
numpy's product; the anchors' transformer then ran at 171 ms on the engine instead of 100-120 (1 of 10 fresh
processes of ``tests/bench/choice.py``). After the wait, 0 of 12."""


_CLEAR_RATIO = 1.25
"""At two threads or more, the two products are timed again (``_CALIBRATIONS``) until torch's is ahead by this ratio:
a core taken during the ~15 ms of a timing slows torch's threads, never speeds them, so a tie or numpy ahead may be
that and is looked at again a moment later, each side keeping its fastest (at one thread the two are equal here,
and a tie costs nothing). On this 2-core AMD EPYC (AVX-512) the calibration shape takes numpy's product ~1.3 ms at
one thread and torch's 0.66-0.91 at two; 2 of 8 fresh processes on the anchors' transformer met torch at one
thread's speed (1.32 against numpy's 1.39 ms, 1.27 against 1.34), a coin toss, and a process whose toss picks
numpy's products runs the step at 137 ms against 85 (one process, the two interleaved); a fresh default process
met torch at 1.17 ms on its first timing (0.96 on its second). Timed again 50 ms apart, 40 of 40 calibrations in
10 other fresh processes had torch ahead (torch 0.66-0.91 ms, numpy 1.27-1.40)."""

_CALIBRATIONS = 4
"""The most times the two products are timed for one thread count: timed again after ``_CLOSE_WAIT_SECONDS``,
each side keeping its fastest timing, until torch's is clearly ahead (``_CLEAR_RATIO``) or this many are taken."""

_CLOSE_WAIT_SECONDS = 0.05
"""The pause before the products are timed again: another moment for the cores, a third of the first wait's."""


def _numpy_matmul(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return np.matmul(a.numpy(), b.numpy())


def _best_pair(a, b, products=(_numpy_matmul, torch.matmul), repeats: int = 5) -> tuple[float, float]:
    """The fastest of ``repeats`` timings of each of the two ``products`` (numpy's, torch's), taken in turns (a
    burst of other work then slows both, not one), each run once untimed first."""
    best = [math.inf, math.inf]
    for product in products:
        product(a, b)
    for _ in range(repeats):
        for i, product in enumerate(products):
            start = time.perf_counter()
            product(a, b)
            best[i] = min(best[i], time.perf_counter() - start)
    return best[0], best[1]


def torch_is_faster(threads: int) -> bool:
    """Whether torch's product beats numpy's (OpenBLAS at the one thread the runner gives it, ``runner.
    PRODUCT_THREADS``) at ``threads`` of torch's, timed once per thread count in this process (~0.2 s, most of it a
    wait: ``_POOLS_SETTLE_SECONDS``; at two threads or more, unless torch's is clearly ahead, up to
    ``_CALIBRATIONS`` times). On this AMD EPYC (AVX2), float32, the anchors' transformer step took 156 ms with
    numpy's products and 102 with torch's at two threads (PyTorch's own step 83): one thread each, the two products
    are equal ([2048, 256] x [256, 1024]: 11.7 and 12.2 ms), and numpy's at two threads would thrash against torch's
    spinning OpenMP pool. On an AVX-512 EPYC torch's MKL took 3.3 ms where numpy's OpenBLAS took 1.1 at one thread:
    there numpy wins, hence a measurement rather than a rule."""
    known = _faster.get(threads)  # each product asks: no lock once measured
    if known is not None:
        return known
    with _lock, one_time():
        if threads not in _faster:
            m, k, n = _CALIBRATION_SHAPE
            a, b = torch.rand(m, k), torch.rand(k, n)
            time.sleep(_POOLS_SETTLE_SECONDS)
            numpy_s, torch_s = _best_pair(a, b)
            for _ in range(_CALIBRATIONS - 1 if threads > 1 else 0):
                if _CLEAR_RATIO * torch_s < numpy_s:
                    break
                time.sleep(_CLOSE_WAIT_SECONDS)
                again = _best_pair(a, b)
                numpy_s, torch_s = min(numpy_s, again[0]), min(torch_s, again[1])
            _faster[threads] = torch_s < numpy_s
        return _faster[threads]


def _numpy_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.ndim > 2 and b.ndim == 2:  # x[..., k] @ y[k, n] is one product of x's rows
        rows = np.matmul(a.reshape(math.prod(a.shape[:-1]), a.shape[-1]).numpy(), b.numpy())
        return torch.from_numpy(rows).reshape(tuple(a.shape[:-1]) + (b.shape[-1],))
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


def _product_elements(a: torch.Tensor, b: torch.Tensor) -> int:
    """The elements of ``a @ b`` (batch dims broadcast, a 1-D operand's dim dropped), in plain ints: the batch dims
    by ``program.shapes.broadcast_shapes``, 2.2 us for the transformer's [16, 4, 128, 64] pair, where
    ``torch.broadcast_shapes`` took 14 us a call."""
    elements = (a.shape[-2] if a.ndim > 1 else 1) * (b.shape[-1] if b.ndim > 1 else 1)
    if a.ndim <= 2 and b.ndim <= 2:
        return elements
    return elements * math.prod(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))


def matmul(op):
    """x @ y, either operand transposed in its last two dims as the attrs say (a 1-D operand never is). Torch's
    product only where both are finite: MKL's gave NaN where IEEE (and numpy's OpenBLAS) gives -inf (a row with
    -inf against a finite column, float32, one in about 30 random products with special values).

    Which is summed, the operands before or the product after, is whichever has fewer elements (operands this run
    knows finite not counted). A product with no empty dim is finite only if its operands are: an infinity or a NaN
    at a[i, k] makes every a[i, k] b[k, j] infinite or NaN, and so row i's sums (IEEE), and likewise b[k, j] column
    j (MKL's product keeps a non-finite where IEEE does, only not always the same one:
    ``tests/backends/test_torch_products.py`` holds it to that). So a finite product proves its operands finite,
    and the run remembers them; one that is not is taken again from numpy's product. Measured on the anchors'
    seed MLP (x [64, 1000] @ w1 [1000, 100]): one sum of 6,400 elements instead of two of 164,000."""
    tx, ty = op.attr("transpose_x"), op.attr("transpose_y")

    def product(a, b):
        x = a.transpose(-1, -2) if tx and a.ndim > 1 else a
        y = b.transpose(-1, -2) if ty and b.ndim > 1 else b
        if not (a.dtype in _TORCH_DTYPES and torch_is_faster(torch.get_num_threads()) and a.numel() and b.numel()):
            return _numpy_product(x, y)
        unknown = [t for t in (a, b) if not remembered(t)]  # (the operands as made: the run knows them)
        if sum(t.numel() for t in unknown) <= _product_elements(x, y):
            return torch.matmul(x, y) if all_finite(*unknown) else _numpy_product(x, y)
        out = torch.matmul(x, y)
        if not all_finite(out):
            return _numpy_product(x, y)
        for t in unknown:
            known_finite(t)
        return out

    return product


KERNELS = {"matmul": matmul}
