"""The torch engine: block 0 run op by op on PyTorch CPU tensors (eager ATen, whose convolutions are oneDNN's).

``make_runner(settings)`` is all the executor uses (``backend.runner``); ``KERNELS`` (op type -> kernel factory)
and ``problems(block)`` say what it runs. Needs the ``torch`` package; imported only when a runner is made.
"""
from __future__ import annotations

from .kernels import KERNELS
from .refused import problems
from .runner import TorchRunner, make_runner

__all__ = ["KERNELS", "TorchRunner", "make_runner", "problems"]
