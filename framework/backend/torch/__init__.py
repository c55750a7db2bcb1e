"""The torch engine: block 0 run op by op on PyTorch CPU tensors (eager ATen, whose convolutions are oneDNN's).

``make_runner(settings)`` is all the executor uses (``backend.runner``); ``KERNELS`` (op type -> kernel factory)
and ``problems(block)`` say what it runs, ``lowered_text`` how (``gradgen show PROGRAM --backend torch``). Needs
the ``torch`` package; imported only when a runner is made.
"""
from __future__ import annotations

from .kernels import KERNELS
from .refused import problems
from .runner import TorchRunner, make_runner
from .show import lowered_text

__all__ = ["KERNELS", "TorchRunner", "lowered_text", "make_runner", "problems"]
