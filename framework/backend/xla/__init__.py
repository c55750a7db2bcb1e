"""The xla backend: a whole block lowered to one XLA computation through jax, compiled once per run-time shapes.

``make_runner`` is what the executor gets (``backend.runner("xla", ...)``, ``runner``); ``problems(block)`` lists
the ops it cannot run, and ``CompiledBlock`` is one block compiled for one run signature. Needs the
``gradgen[xla]`` extra (jax).
"""
from __future__ import annotations

from .compile import CompiledBlock, cache_dir, device_for, own_array
from .lowerings import LOWERINGS
from .refused import REFUSED, problems
from .runner import NAME, make_runner
from .show import lowered_text

__all__ = ["CompiledBlock", "LOWERINGS", "NAME", "REFUSED", "cache_dir", "device_for", "lowered_text",
           "make_runner", "own_array", "problems"]
