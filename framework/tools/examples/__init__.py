"""Built-in example models the ``gradgen example`` command trains.

Each example is a plain function returning an ``Example``: the main and
startup programs, the loss var, a feed for one step, and the number of steps
and optimizer it trains with by default. ``EXAMPLES`` lists them by name.
"""
from __future__ import annotations

from typing import Callable

from .base import Example
from .cnn import cnn
from .mlp import mlp
from .rnn import rnn

EXAMPLES: dict[str, Callable[..., Example]] = {"mlp": mlp, "cnn": cnn, "rnn": rnn}
"""name -> builder."""

__all__ = ["EXAMPLES", "Example"]
