"""``fluid.io``: inference models, and persistables saved to and loaded from a folder, in Paddle's call order."""
from __future__ import annotations

import os

from gradgen.program.guard import default_main_program

from ..inference import load_inference_model, save_inference_model
from ..io import load_params, save_params
from ..runtime.scope import global_scope

PERSISTABLES = "persistables.npz"


def save_persistables(executor, dirname: str, main_program=None, filename: str | None = None) -> list[str]:
    """Every persistable var of ``main_program`` in the global scope, to ``dirname/persistables.npz``."""
    os.makedirs(dirname, exist_ok=True)
    return save_params(os.path.join(dirname, filename or PERSISTABLES), main_program or default_main_program(),
                       global_scope())


def load_persistables(executor, dirname: str, main_program=None, filename: str | None = None) -> list[str]:
    """The persistable vars of ``main_program`` from ``dirname/persistables.npz`` into the global scope."""
    return load_params(os.path.join(dirname, filename or PERSISTABLES), main_program or default_main_program(),
                       global_scope())


__all__ = ["save_inference_model", "load_inference_model", "save_persistables", "load_persistables"]
