"""What a forward kernel computed that its gradient kernel over the same tensor needs again, kept while that tensor
lives, as PyTorch's autograd keeps it: batch norm's batch statistics (``native_batch_norm``'s save_mean and
save_invstd; recomputing them took 1.7 ms of the gradient's 3 on ResNet's [32, 64, 32, 32] float32, two threads),
a max pooling's window indices (``max_pool2d_with_indices``; 0.33 ms of its gradient's 0.37 on LeNet's first
pool) and layer norm's row statistics (``native_layer_norm``'s mean and rstd; 0.6 ms of its gradient's 1.5 inside
the transformer block's step).

The ops' gradients are functions of their inputs alone (``batch_norm_grad`` recomputes the statistics:
program/ops/network.py); this is the engine's shortcut, keyed by the tensor object itself and by what the value
depends on besides it (``key``: the op kind and its attrs). It is safe because the engine never writes into a
tensor (a live tensor's values stay its own) and an entry dies with its tensor (a later tensor at the same address
is another key). A kept value is the one the recomputation would make (the same kernel on the same tensor), bit
for bit.
"""
from __future__ import annotations

import weakref
from typing import Any, Hashable

import torch

__all__ = ["ATEN", "keep", "kept", "row_statistics_key"]

_KEPT: dict[int, tuple[weakref.ref, dict[Hashable, Any]]] = {}

_aten = torch.ops.aten


def keep(x: torch.Tensor, key: Hashable, value: Any) -> None:
    """Keep ``value`` for ``x`` and ``key`` while ``x`` lives."""
    found = _KEPT.get(id(x))
    if found is not None and found[0]() is x:
        found[1][key] = value
        return
    ident = id(x)

    def gone(ref, ident=ident):
        if _KEPT.get(ident, (None,))[0] is ref:
            _KEPT.pop(ident, None)

    _KEPT[ident] = (weakref.ref(x, gone), {key: value})


def kept(x: torch.Tensor, key: Hashable) -> Any:
    """The value kept for ``x`` and ``key``, or None."""
    found = _KEPT.get(id(x))
    if found is None or found[0]() is not x:
        return None
    return found[1].get(key)


def row_statistics_key(norm, eps: float) -> tuple:
    """The key ``native_layer_norm``'s mean and rstd of X's rows over the dims ``norm`` are kept under."""
    return "native_layer_norm", tuple(norm), eps


class _KeepingAten:
    """ATen's operators as the derived kernels call them (``derived.py``: an op's one ATen call), but
    ``native_layer_norm`` keeps the rows' mean and rstd for its X, for the gradient that normalizes X again
    (``network._statistics``). They are that recomputation's bit for bit: ATen forms them from X alone, with a
    weight and bias given or not (tests/backends/test_torch_norms.py). Inside the transformer block's step (two
    threads) the gradient's own ``native_layer_norm`` took 0.60 ms of its 1.48 (2026-12-01)."""

    def __getattr__(self, name: str):
        found = getattr(_aten, name)
        setattr(self, name, found)  # (looked up once)
        return found

    @staticmethod
    def native_layer_norm(x: torch.Tensor, norm, weight, bias, eps: float):
        y, mean, rstd = _aten.native_layer_norm(x, norm, weight, bias, eps)
        keep(x, row_statistics_key(norm, eps), (mean, rstd))
        return y, mean, rstd


ATEN = _KeepingAten()
"""The operators the derived kernels' ATen calls are given."""
