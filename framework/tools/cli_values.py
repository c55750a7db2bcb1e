"""Turning command-line strings into names, shapes and arrays, and arrays into short text."""
from __future__ import annotations

import argparse
import difflib
import io
import os
from typing import Sequence
from urllib.parse import quote

import numpy as np

from gradgen.program import Program
from gradgen.program.errors import GradgenError
from gradgen.program.files import write_atomically

__all__ = ["CliError", "program_var", "ArgumentError", "parse_names", "split_pair", "count", "positive",
           "parse_shape_args", "describe_array", "brief_array", "npy_file_name", "save_arrays"]


class CliError(GradgenError):
    """A command-line mistake: a missing file, an unknown var name, a malformed argument."""


def program_var(program: Program, name: str, what: str):
    """The var ``name`` of the program's global block, or a CliError listing some of its vars."""
    var = program.global_block().find_var(name)
    if var is None:
        known = sorted(program.global_block().vars)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f" (vars: {', '.join(known[:12])}, ...)"
        raise CliError(f"{what} '{name}' is not a var of the program's global block{hint}")
    return var


class ArgumentError(GradgenError):
    """A malformed command-line value."""


def parse_names(text: str | None) -> list[str]:
    """``"a,b, c"`` -> ``["a", "b", "c"]``; None or empty -> ``[]``."""
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def split_pair(item: str, what: str) -> tuple[str, str]:
    """``"x=a.npy"`` -> ``("x", "a.npy")``, or an ArgumentError saying ``what`` must look like NAME=VALUE."""
    name, sep, value = item.partition("=")
    if not sep or not name or not value:
        raise ArgumentError(f"{what} must look like NAME=VALUE, got {item!r}")
    return name.strip(), value.strip()


def count(text: str) -> int:
    """An argparse type: a whole number >= 0 (``--steps``); argparse reports the error as a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1 (``--threads``)."""
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def parse_shape_args(items: list[str]) -> dict[str, tuple[int, ...]]:
    """``["x=64,1000"]`` -> ``{"x": (64, 1000)}``."""
    shapes = {}
    for item in items:
        name, dims = split_pair(item, "--feed-shape")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise ArgumentError(f"--feed-shape {name}: dims must be comma-separated integers, got {dims!r}") from None
        if any(d < 0 for d in shape):
            raise ArgumentError(f"--feed-shape {name}: dims must be >= 0 (a feed has a known shape), got {dims!r}")
        shapes[name] = shape
    return shapes


def describe_array(value) -> str:
    """The array itself when small; shape, dtype and summary statistics when large."""
    a = np.asarray(value)
    head = f"{a.dtype}{list(a.shape)}"
    if a.size <= 16:
        return f"{head} {np.array2string(a, precision=6, separator=', ')}"
    if np.issubdtype(a.dtype, np.number):
        return (f"{head} min {a.min():.6g}, max {a.max():.6g}, mean {a.mean():.6g}, "
                f"std {a.std():.6g}")
    return f"{head} ({a.size} elements)"


def brief_array(value) -> str:
    """A short form for a line of a log: one number as itself (``0.312``), more as dtype, shape and mean."""
    a = np.asarray(value)
    if a.size == 1:
        number = a.reshape(-1)[0]
        return f"{number:.6g}" if np.issubdtype(a.dtype, np.floating) else str(number.item())
    head = f"{a.dtype}{list(a.shape)}"
    return f"{head} mean {a.mean():.6g}" if a.size and np.issubdtype(a.dtype, np.number) else head


def npy_file_name(name: str) -> str:
    """The file a var's array is saved in: ``a@GRAD`` -> ``a@GRAD.npy``; a character no file name may hold
    everywhere is %-escaped (``block/x`` -> ``block%2Fx.npy``), so different vars never share a file."""
    return quote(name, safe="@-_.") + ".npy"


def save_arrays(directory: str, arrays: Sequence[tuple[str, np.ndarray]]) -> list[str]:
    """Write each ``(var name, array)`` to ``directory`` (made if missing) as ``npy_file_name``; the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, value in arrays:
        data = io.BytesIO()
        np.save(data, np.asarray(value), allow_pickle=False)
        path = os.path.join(directory, npy_file_name(name))
        write_atomically(path, data.getvalue())
        paths.append(path)
    return paths
