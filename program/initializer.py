"""Parameter initializers: each one says which op fills a parameter in the startup program."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .shapes import numel


@dataclass(frozen=True)
class Constant:
    value: int | float = 0.0
    """An int stays an int, so an int64 parameter gets it exactly (fill_constant's value is a scalar attr)."""

    def op(self, shape, dtype, seed: int) -> tuple[str, dict[str, Any]]:
        return "fill_constant", {"shape": list(shape), "dtype": dtype, "value": self.value}


@dataclass(frozen=True)
class Uniform:
    low: float = -1.0
    high: float = 1.0
    seed: int | None = None

    def op(self, shape, dtype, seed: int):
        return "uniform_random", {"shape": list(shape), "dtype": dtype, "min": float(self.low),
                                  "max": float(self.high), "seed": self.seed if self.seed is not None else seed}


@dataclass(frozen=True)
class Normal:
    mean: float = 0.0
    std: float = 1.0
    seed: int | None = None

    def op(self, shape, dtype, seed: int):
        return "gaussian_random", {"shape": list(shape), "dtype": dtype, "mean": float(self.mean),
                                   "std": float(self.std), "seed": self.seed if self.seed is not None else seed}


def fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) as Glorot & Bengio define them; conv kernels count their receptive field."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = numel(shape[2:]) if len(shape) > 2 else 1
    if len(shape) > 2:  # conv filters: [out_channels, in_channels, kh, kw]
        return shape[1] * receptive, shape[0] * receptive
    return shape[0], shape[1]


@dataclass(frozen=True)
class XavierUniform:
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""

    seed: int | None = None

    def op(self, shape, dtype, seed: int):
        fan_in, fan_out = fans(shape)
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return Uniform(-limit, limit, self.seed).op(shape, dtype, seed)


__all__ = ["Constant", "Uniform", "Normal", "fans", "XavierUniform"]
