"""Parameter files: the persistable vars of a program, as a numpy ``.npz`` archive.

The archive holds one ``<name>.npy`` member per var, under the var's exact
name (``np.load`` reads it too). It is written here with ``zipfile`` and
``np.lib.format`` rather than ``np.savez``, whose keyword arguments would
swallow vars named ``file`` or ``allow_pickle``. Files are written atomically
(see ``gradgen.program.files``), read with ``allow_pickle=False``, and checked
against the program's declared names, shapes and dtypes before anything in
the scope changes.
"""
from __future__ import annotations

import io as _io
import os
import zipfile

import numpy as np

from gradgen.program.files import write_atomically

from .errors import ParamFileError
from .runtime.scope import Scope

__all__ = ["persistable_vars", "save_params", "load_params", "arrays_to_npz", "arrays_from_npz"]

_MEMBER_SUFFIX = ".npy"


def arrays_to_npz(arrays: dict[str, np.ndarray]) -> bytes:
    """The bytes of an ``.npz`` archive holding each array as member ``<name>.npy``, names kept exactly."""
    buffer = _io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            if "\0" in name:
                raise ParamFileError(f"cannot save var {name!r}: a zip member name cannot hold a NUL character")
            info = zipfile.ZipInfo(name + _MEMBER_SUFFIX, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def arrays_from_npz(where: str) -> dict[str, np.ndarray]:
    """Every ``<name>.npy`` member of the archive at ``where``, keyed by exact name; never unpickles."""
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(where) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(_MEMBER_SUFFIX):
                    raise ParamFileError(f"{where}: member {info.filename!r} is not a .npy array")
                name = info.filename[:-len(_MEMBER_SUFFIX)]
                if name in arrays:
                    raise ParamFileError(f"{where}: holds '{name}' twice")
                with archive.open(info) as member:
                    arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
    except FileNotFoundError:
        raise ParamFileError(f"{where}: no such parameter file") from None
    except IsADirectoryError:
        raise ParamFileError(f"{where}: is a directory, not a parameter file (.npz)") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise ParamFileError(f"{where}: not a gradgen parameter file (.npz): {e}") from None
    return arrays


def persistable_vars(program) -> list:
    """Every persistable var of the program's global block, in declaration order."""
    return [v for v in program.global_block().vars.values() if v.persistable]


def save_params(path: str | os.PathLike, program, scope: Scope) -> list[str]:
    """Write every persistable var of ``program`` held in ``scope`` to ``path``; return the names written."""
    arrays = {}
    with scope.run_lock:  # every array from the same step: a run on this scope commits before or after, not between
        for var in persistable_vars(program):
            if var.name in scope:
                arrays[var.name] = np.asarray(scope[var.name])
    # Outside the lock the arrays stay as they were: a commit swaps whole arrays, and a run updates one in place
    # (or recycles it as a buffer) only while nobody else holds a reference, as ``arrays`` does.
    if not arrays:
        raise ParamFileError("nothing to save: the scope holds none of the program's persistable vars "
                             "(run the startup program first)")
    write_atomically(path, arrays_to_npz(arrays))
    return list(arrays)


def load_params(path: str | os.PathLike, program, scope: Scope, strict: bool = True) -> list[str]:
    """Read ``path`` into ``scope`` after checking each array against the program's var of that name.

    With ``strict``, every persistable var of the program must be in the file.
    Arrays of names the program does not declare are skipped when every
    persistable var of the program is in the file (say, a training file
    loaded into the inference program); next to missing ones they are an
    error, as they suggest renamed vars. Nothing is written to the scope
    unless every check passes.
    """
    where = os.fspath(path)
    arrays = arrays_from_npz(where)
    declared = {v.name: v for v in persistable_vars(program)}
    missing = [n for n in declared if n not in arrays]
    extra = [n for n in arrays if n not in declared]
    if extra and (missing or len(extra) == len(arrays)):
        # A file may hold more than the program reads (a training file, with the optimizer's state, loaded
        # into the test or inference program): those arrays are skipped. Extra names next to missing ones,
        # or with nothing matching, look like renamed vars: an error, not a silent partial load.
        raise ParamFileError(f"{where}: holds '{extra[0]}', which is not a persistable var of the program "
                             f"(and the program's {', '.join(repr(n) for n in missing) or 'vars'} are not in the file)")
    arrays = {name: array for name, array in arrays.items() if name in declared}
    for name, array in arrays.items():
        var = declared[name]
        shape_ok = len(var.shape) == array.ndim and all(d in (-1, a) for d, a in zip(var.shape, array.shape))
        if not shape_ok or array.dtype.name != var.dtype:
            raise ParamFileError(f"{where}: '{name}' is {array.dtype.name}{list(array.shape)} in the file but the "
                                 f"program declares {var.type_str()}")
    if strict and missing:
        raise ParamFileError(f"{where}: missing persistable var(s) {', '.join(repr(n) for n in missing)}")
    with scope.run_lock:  # between runs: a run already under way would commit over the loaded values
        scope.update(arrays)  # one operation: a KeyboardInterrupt cannot leave half a file loaded
    return list(arrays)
