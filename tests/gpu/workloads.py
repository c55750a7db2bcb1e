"""The four workloads of the GPU check as plain numpy data: initial parameters, one batch and the optimizer.

Every system (gradgen, JAX, PyTorch) starts from these same arrays, drawn with numpy from a fixed seed, so the
first step's loss is the same model on the same data everywhere. Parameter names are the ones gradgen's layers
give (``c1.w``, ``bn0.scale``, ``q.b``, ...); the JAX and PyTorch versions read them by the same names.

The sizes are those of the anchors' workloads: LeNet-5 at batch 64; two ResNet basic blocks (conv-BN-ReLU,
conv-BN, skip) at batch 32, 64 channels, 32x32; a pre-norm transformer block at batch 16, sequence 128, width 256,
4 heads, feed-forward 1024, trained with Adam; a tanh RNN of width 128 over T=50 steps in a while loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DTYPE", "NAMES", "Workload", "make", "TRANSFORMER", "RNN"]

DTYPE = "float32"
NAMES = ("lenet", "resnet", "transformer", "rnn")
TRANSFORMER = {"batch": 16, "seq": 128, "width": 256, "heads": 4, "ff": 1024}
RNN = {"steps": 50, "batch": 32, "inputs": 32, "width": 128}


@dataclass(frozen=True)
class Workload:
    """One training step's inputs: ``params`` by gradgen name, the batch ``x``/``y``, and the update rule."""

    name: str
    params: dict[str, np.ndarray]
    x: np.ndarray
    y: np.ndarray
    learning_rate: float
    optimizer: str  # "sgd" or "adam" (beta1 0.9, beta2 0.999, epsilon 1e-8)


def _he(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(DTYPE)


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n, DTYPE)


def _lenet(rng: np.random.Generator) -> Workload:
    params = {"c1.w": _he(rng, (6, 1, 5, 5), 25), "c1.b": _zeros(6),
              "c2.w": _he(rng, (16, 6, 5, 5), 150), "c2.b": _zeros(16)}
    for k, (fan_in, size) in enumerate(((256, 120), (120, 84), (84, 10)), start=1):
        params[f"f{k}.w"], params[f"f{k}.b"] = _he(rng, (fan_in, size), fan_in), _zeros(size)
    x = rng.standard_normal((64, 1, 28, 28)).astype(DTYPE)
    return Workload("lenet", params, x, rng.integers(0, 10, 64).astype(np.int64), 0.01, "sgd")


def _resnet(rng: np.random.Generator) -> Workload:
    params = {}
    for k in range(4):
        params[f"conv{k}.w"] = _he(rng, (64, 64, 3, 3), 64 * 9)
        params[f"bn{k}.scale"], params[f"bn{k}.bias"] = np.ones(64, DTYPE), _zeros(64)
    params["fc.w"], params["fc.b"] = _he(rng, (64, 10), 64), _zeros(10)
    x = rng.standard_normal((32, 64, 32, 32)).astype(DTYPE)
    return Workload("resnet", params, x, rng.integers(0, 10, 32).astype(np.int64), 0.01, "sgd")


def _transformer(rng: np.random.Generator) -> Workload:
    d, f = TRANSFORMER["width"], TRANSFORMER["ff"]

    def xavier(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(DTYPE)

    params = {"ln1.scale": np.ones(d, DTYPE), "ln1.bias": _zeros(d), "ln2.scale": np.ones(d, DTYPE),
              "ln2.bias": _zeros(d)}
    for name in ("q", "k", "v", "o"):
        params[f"{name}.w"], params[f"{name}.b"] = xavier(d, d), _zeros(d)
    params["ff1.w"], params["ff1.b"] = xavier(d, f), _zeros(f)
    params["ff2.w"], params["ff2.b"] = xavier(f, d), _zeros(d)
    shape = (TRANSFORMER["batch"], TRANSFORMER["seq"], d)
    x, y = (rng.standard_normal(shape).astype(DTYPE) for _ in range(2))
    return Workload("transformer", params, x, y, 1e-3, "adam")


def _rnn(rng: np.random.Generator) -> Workload:
    i, h = RNN["inputs"], RNN["width"]
    params = {"w_xh": (rng.standard_normal((i, h)) / np.sqrt(i)).astype(DTYPE),
              "w_hh": (rng.standard_normal((h, h)) / np.sqrt(h)).astype(DTYPE),
              "b": _zeros(h), "w_out": (rng.standard_normal((h, 1)) / np.sqrt(h)).astype(DTYPE)}
    x = rng.standard_normal((RNN["steps"], RNN["batch"], i)).astype(DTYPE)
    return Workload("rnn", params, x, rng.standard_normal((RNN["batch"], 1)).astype(DTYPE), 0.01, "sgd")


_MAKERS = {"lenet": _lenet, "resnet": _resnet, "transformer": _transformer, "rnn": _rnn}


def make(name: str) -> Workload:
    """Workload ``name`` (one of ``NAMES``), the same arrays on every call (its own seed)."""
    if name not in _MAKERS:
        raise ValueError(f"unknown workload {name!r}; the workloads are {', '.join(NAMES)}")
    return _MAKERS[name](np.random.default_rng(NAMES.index(name)))
