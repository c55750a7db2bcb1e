"""Finding the line of user code that created an op, for error messages."""
from __future__ import annotations

import os
import sys

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OUR_DIRS = tuple(os.path.join(_PACKAGE_ROOT, p) + os.sep for p in ("program", "grad_makers", "framework"))
_EXAMPLES_DIR = os.path.join(_PACKAGE_ROOT, "framework", "tools", "examples") + os.sep
"""The built-in example models are user code of gradgen's own: their lines are worth naming."""


def _console_script(filename: str) -> bool:
    """Whether ``filename`` is the ``gradgen`` command pip installs (``.../bin/gradgen``): it only calls the CLI,
    so ops the CLI makes (a backward pass, an optimizer) were made by no user line."""
    return os.path.basename(filename) == "gradgen" and os.path.basename(os.path.dirname(filename)) == "bin"


def user_callsite() -> str | None:
    """``file.py:line`` of the nearest stack frame outside gradgen's own packages."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        ours = (filename.startswith(_OUR_DIRS) and not filename.startswith(_EXAMPLES_DIR)) or _console_script(filename)
        if not ours and not filename.startswith("<frozen"):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


__all__ = ["user_callsite"]
