"""What an example model is: programs, a loss, data, and how long to train."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Example:
    """A ready-to-train model. ``main`` has no backward part yet: the command appends it."""

    name: str
    description: str
    main: object
    startup: object
    loss: object
    feed: dict[str, np.ndarray]
    steps: int
    make_optimizer: object
    """A function returning a fresh optimizer for the model."""
    params: list = field(default_factory=list)
