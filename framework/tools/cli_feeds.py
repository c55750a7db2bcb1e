"""``--feed``: arrays from ``.npy`` and ``.npz`` files, checked against the program's data vars (and, with
``--cast``, converted to their dtypes) before a run, so a mistake is a command-line message with command-line
advice.

    --feed x=x.npy        the array in x.npy
    --feed x=batch.npz    the archive's array 'x' (or its only array)
    --feed batch.npz      every array of the archive, each feeding the var of its name
"""
from __future__ import annotations

import os

import numpy as np

from gradgen.program import Program

from .cli_values import ArgumentError, CliError, program_var, split_pair
from .feed_cast import cast_feed

__all__ = ["load_feeds", "program_feeds"]


def _read(item: str, path: str):
    """The array, or the ``{name: array}`` of an archive, at ``path``; never unpickles."""
    if not os.path.isfile(path):
        raise ArgumentError(f"--feed {item}: no such file: {path}")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ArgumentError(f"--feed {item}: {path} is not a .npy or .npz array file: {e}") from None
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded:
        try:
            return {name: loaded[name] for name in loaded.files}
        except (ValueError, OSError, EOFError) as e:
            raise ArgumentError(f"--feed {item}: {path} holds an array that cannot be read: {e}") from None


def _one_of(name: str, path: str, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if name in arrays:
        return arrays[name]
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    raise ArgumentError(f"--feed {name}={path}: the archive holds no array '{name}' (it holds "
                        f"{', '.join(arrays) or 'nothing'}); give --feed {path} to feed each of its arrays by name")


def load_feeds(items: list[str]) -> dict[str, np.ndarray]:
    """``--feed`` values (``NAME=FILE.npy``, ``NAME=FILE.npz`` or ``FILE.npz``) as ``{var name: array}``."""
    feeds: dict[str, np.ndarray] = {}
    given: dict[str, str] = {}
    for item in items:
        if "=" in item:
            name, path = split_pair(item, "--feed")
            loaded = _read(name, path)
            found = {name: loaded if isinstance(loaded, np.ndarray) else _one_of(name, path, loaded)}
        else:
            path = item.strip()
            if not os.path.isfile(path):
                raise ArgumentError(f"--feed must look like NAME=VALUE (NAME=FILE.npy, NAME=FILE.npz) or FILE.npz, "
                                    f"got {item!r}, which is no file")
            loaded = _read(path, path)
            if isinstance(loaded, np.ndarray):
                raise ArgumentError(f"--feed {path}: a .npy file holds one unnamed array; give NAME={path}")
            found = loaded
        for name, value in found.items():
            if name in feeds:
                raise ArgumentError(f"--feed: '{name}' is given twice ({given[name]} and {item})")
            feeds[name], given[name] = value, item
    return feeds


def program_feeds(program: Program, items: list[str], cast: bool = False) -> dict[str, np.ndarray]:
    """The ``--feed`` arrays, each naming a var of the program and of its declared dtype (converted by
    ``feed_cast``'s rule when ``cast``: a CastError names a value that would change), or a CliError that says
    what to do."""
    feeds = load_feeds(items)
    for name, value in feeds.items():
        var = program_var(program, name, "fed var")
        if value.dtype == np.dtype(var.dtype):
            continue
        if not cast:
            raise CliError(f"feed '{name}' is {value.dtype}, but the program declares {name}: {var.type_str()}; "
                           "add --cast to convert it (floats round to a narrower float; any other conversion is "
                           "done only when no value changes)")
        feeds[name] = cast_feed(name, value, var.dtype)
    return feeds
