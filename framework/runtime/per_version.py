"""What a runner caches about a program, dropped as soon as the program changes.

Plans, compiled blocks, ``backend="auto"``'s trials: each is valid for one version of one program
(``Program.version`` moves on every edit), and must not keep the program alive. ``PerVersion`` is that cache:
weakly keyed by the program, one dict of entries per program, emptied when the version it was made for is gone.
"""
from __future__ import annotations

import weakref
from typing import Any

__all__ = ["PerVersion"]


class PerVersion:
    """``entries(program)``: the dict of cached entries for ``program``'s present version (empty after an edit)."""

    def __init__(self):
        self._by_program: "weakref.WeakKeyDictionary[Any, tuple[int, dict]]" = weakref.WeakKeyDictionary()

    def entries(self, program) -> dict:
        found = self._by_program.get(program)
        if found is None or found[0] != program.version:
            found = (program.version, {})
            self._by_program[program] = found
        return found[1]
