"""Inference models: a program pruned to its predictions, with just the parameters it reads, in one folder.

    save_inference_model("model_dir", ["x"], [y_predict], main, scope)
    program, feed_names, fetch_vars = load_inference_model("model_dir", scope=scope)
    (y,) = Executor().run(program, feed={feed_names[0]: xs}, fetch_list=fetch_vars, scope=scope)

The folder holds ``model.json`` (the pruned program: no loss, no labels, no
backward or optimizer ops, dropout and batch norm in inference mode),
``params.npz`` (only the persistable vars that program reads) and
``inference.json`` (which vars to feed and fetch). Paddle's positional
order, ``save_inference_model(dirname, feeds, fetches, executor)`` and
``load_inference_model(dirname, executor)``, works too: the executor is not
needed (there are no load or save ops to run) and is ignored.
"""
from __future__ import annotations

import json
import os
from typing import Any

from gradgen.program import Program
from gradgen.program.errors import GradgenError
from gradgen.program.guard import default_main_program
from gradgen.program.serialize import write_atomically
from gradgen.program.variable import var_names

from .io import load_params, save_params
from .passes.prune import prune, required_inputs
from .runtime.executor import Executor
from .runtime.scope import Scope, global_scope

MANIFEST = "inference.json"
FORMAT_NAME = "gradgen-inference-model"
FORMAT_VERSION = 1


class InferenceModelError(GradgenError):
    """An inference model folder that cannot be written or read as asked."""


def save_inference_model(dirname: str | os.PathLike, feeds, fetches, program: Program | Any = None,
                         scope: Scope | Any = None, *, main_program: Program | None = None,
                         model_filename: str | None = None, params_filename: str | None = None) -> list[str]:
    """Write ``program`` pruned to ``fetches`` (fed by ``feeds``) and the parameters it reads from ``scope``.

    ``program`` defaults to the default main program, ``scope`` to the global
    scope. Returns the names of the parameters written. A PruneError says
    which op needs a var that is not among the feeds.
    """
    if isinstance(program, Executor):  # Paddle's order: (dirname, feeds, fetches, executor, main_program)
        program, scope = scope, None
    program = main_program or program or default_main_program()
    scope = global_scope() if scope is None else scope
    feed_names = var_names(feeds, "feeds", InferenceModelError)
    fetch_names = var_names(fetches, "fetches", InferenceModelError)
    infer = prune(program, fetch_names, feeds=feed_names, for_test=True)
    _, persistables = required_inputs(infer.global_block())
    missing = [n for n in persistables if n not in scope]
    if missing:
        raise InferenceModelError(f"the scope holds no value for {', '.join(repr(n) for n in missing)} "
                                  "(run the startup program first, or load the parameters)")
    dirname = os.fspath(dirname)
    os.makedirs(dirname, exist_ok=True)
    model_file, params_file = model_filename or "model.json", params_filename or "params.npz"
    infer.save(os.path.join(dirname, model_file))
    written = save_params(os.path.join(dirname, params_file), infer, scope) if persistables else []
    manifest = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "model": model_file,
                "params": params_file if written else None, "feeds": feed_names, "fetches": fetch_names}
    write_atomically(os.path.join(dirname, MANIFEST), (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    return written


def read_manifest(dirname: str | os.PathLike) -> dict:
    """The checked manifest of an inference model folder (``model``, ``params``, ``feeds``, ``fetches``): what
    ``load_inference_model`` and the ``gradgen`` command read first."""
    dirname = os.fspath(dirname)
    path = os.path.join(dirname, MANIFEST)
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise InferenceModelError(f"{dirname}: not an inference model folder (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InferenceModelError(f"{path}: unreadable: {e}") from None
    ok = (isinstance(manifest, dict) and manifest.get("format") == FORMAT_NAME
          and isinstance(manifest.get("model"), str) and isinstance(manifest.get("params"), (str, type(None)))
          and all(isinstance(manifest.get(k), list) and all(isinstance(n, str) for n in manifest[k])
                  for k in ("feeds", "fetches")))
    if not ok:
        raise InferenceModelError(f"{path}: not a {FORMAT_NAME} manifest (fields: format, version, model, params, "
                                  "feeds, fetches)")
    if manifest.get("version") != FORMAT_VERSION:
        raise InferenceModelError(f"{path}: version {manifest.get('version')!r}; this gradgen reads version "
                                  f"{FORMAT_VERSION}")
    for key in ("model", "params"):
        if manifest[key] is not None and os.path.basename(manifest[key]) != manifest[key]:
            raise InferenceModelError(f"{path}: '{key}' must be a file name inside the folder, got {manifest[key]!r}")
    return manifest


def load_inference_model(dirname: str | os.PathLike, executor: Executor | None = None,
                         model_filename: str | None = None, params_filename: str | None = None,
                         scope: Scope | None = None) -> tuple[Program, list[str], list]:
    """Read a folder written by ``save_inference_model``: ``(program, feed names, fetch vars)``, as Paddle returns.

    The parameters go into ``scope`` (default: the global scope, so inside
    ``scope_guard`` the guarded one). ``executor`` is accepted for Paddle's
    call order and not needed.
    """
    dirname = os.fspath(dirname)
    manifest = read_manifest(dirname)
    program = Program.load(os.path.join(dirname, model_filename or manifest["model"]))
    block = program.global_block()
    for name in manifest["feeds"] + manifest["fetches"]:
        if block.find_var(name) is None:
            raise InferenceModelError(f"{dirname}: the manifest names '{name}', which the program does not declare")
    params = params_filename or manifest["params"]
    if params is not None:
        load_params(os.path.join(dirname, params), program, global_scope() if scope is None else scope)
    return program, list(manifest["feeds"]), [block.var(n) for n in manifest["fetches"]]


__all__ = ["save_inference_model", "load_inference_model", "read_manifest", "InferenceModelError", "MANIFEST"]
