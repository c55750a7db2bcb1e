"""What gradgen writes, read back by the command line: a program file, an inference model folder, and the
parameter file written beside a program.

``save_inference_model`` writes a folder (``model.json``, ``params.npz``,
``inference.json``); ``gradgen import-onnx -o NAME.json`` writes the program
and ``NAME.params.npz`` beside it. Every command that takes a program takes
either, and the commands that run one load the parameters gradgen wrote with it
unless ``--params`` or ``--startup`` says otherwise.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from gradgen.program import Program

from .cli_values import CliError

__all__ = ["ProgramFiles", "open_program", "load_program", "params_beside"]

PARAMS_SUFFIX = ".params.npz"
"""``import-onnx -o NAME.json`` writes its parameters to ``NAME.params.npz``; ``run`` looks for them there."""


class ProgramFiles(NamedTuple):
    """A program as the command line found it on disk."""

    program: Program
    params: str | None
    """The parameter file gradgen wrote with the program (None: there is none)."""
    fetches: tuple[str, ...]
    """The vars an inference folder's manifest fetches (empty for a plain program file)."""


def params_beside(program_path: str) -> str:
    """Where ``import-onnx`` writes the parameters of the program it writes to ``program_path``."""
    return os.path.splitext(program_path)[0] + PARAMS_SUFFIX


def _open_folder(path: str) -> ProgramFiles:
    from ..inference import InferenceModelError, read_manifest

    try:
        manifest = read_manifest(path)
    except InferenceModelError as e:
        raise CliError(f"{e}; a folder given as a program must be one save_inference_model wrote") from None
    params = os.path.join(path, manifest["params"]) if manifest["params"] is not None else None
    return ProgramFiles(Program.load(os.path.join(path, manifest["model"])), params, tuple(manifest["fetches"]))


def open_program(path: str) -> ProgramFiles:
    """The program at ``path`` (a program file, or an inference model folder) and what gradgen wrote with it."""
    if os.path.isdir(path):
        return _open_folder(path)
    if not os.path.exists(path):
        raise CliError(f"no such program file: {path}")
    beside = params_beside(path)
    return ProgramFiles(Program.load(path), beside if os.path.isfile(beside) else None, ())


def load_program(path: str) -> Program:
    """The program at ``path`` (a file, or an inference model folder), or a CliError when there is none."""
    return open_program(path).program
