"""Parameter files: the persistable vars of a program, as a numpy ``.npz`` archive.

Files are written atomically (a temp file renamed into place), loaded with
``allow_pickle=False``, and checked against the program's declared names,
shapes and dtypes before anything in the scope changes.
"""
from __future__ import annotations

import io as _io
import os
import zipfile

import numpy as np

from gradgen.program.serialize import write_atomically

from .errors import ParamFileError
from .runtime.scope import Scope


def persistable_vars(program) -> list:
    """Every persistable var of the program's global block, in declaration order."""
    return [v for v in program.global_block().vars.values() if v.persistable]


def save_params(path: str | os.PathLike, program, scope: Scope) -> list[str]:
    """Write every persistable var of ``program`` held in ``scope`` to ``path``; return the names written."""
    arrays = {}
    for var in persistable_vars(program):
        if var.name in scope:
            arrays[var.name] = np.asarray(scope[var.name])
    if not arrays:
        raise ParamFileError(f"nothing to save: the scope holds none of the program's persistable vars "
                             f"(run the startup program first)")
    buffer = _io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomically(path, buffer.getvalue())
    return list(arrays)


def load_params(path: str | os.PathLike, program, scope: Scope, strict: bool = True) -> list[str]:
    """Read ``path`` into ``scope`` after checking each array against the program's var of that name.

    With ``strict``, every persistable var of the program must be in the file.
    Nothing is written to the scope unless every check passes.
    """
    where = os.fspath(path)
    try:
        with np.load(where, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise ParamFileError(f"{where}: no such parameter file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ParamFileError(f"{where}: not a gradgen parameter file (.npz): {e}") from None
    declared = {v.name: v for v in persistable_vars(program)}
    for name, array in arrays.items():
        var = declared.get(name)
        if var is None:
            raise ParamFileError(f"{where}: holds '{name}', which is not a persistable var of the program")
        shape_ok = len(var.shape) == array.ndim and all(d in (-1, a) for d, a in zip(var.shape, array.shape))
        if not shape_ok or array.dtype.name != var.dtype:
            raise ParamFileError(f"{where}: '{name}' is {array.dtype.name}{list(array.shape)} in the file but the "
                                 f"program declares {var.type_str()}")
    missing = [n for n in declared if n not in arrays]
    if strict and missing:
        raise ParamFileError(f"{where}: missing persistable var(s) {', '.join(repr(n) for n in missing)}")
    for name, array in arrays.items():
        scope.set(name, array)
    return list(arrays)
