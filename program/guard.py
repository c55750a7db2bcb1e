"""The default main and startup programs, and ``program_guard`` to switch them."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .errors import ProgramError
from .program import Program

_main_program = Program()
_startup_program = Program()


def default_main_program() -> Program:
    """Where ``layers`` functions append ops outside any ``program_guard``."""
    return _main_program


def default_startup_program() -> Program:
    """Where parameter initializer ops go outside any ``program_guard``."""
    return _startup_program


def switch_main_program(program: Program) -> Program:
    global _main_program
    previous, _main_program = _main_program, program
    return previous


def switch_startup_program(program: Program) -> Program:
    global _startup_program
    previous, _startup_program = _startup_program, program
    return previous


@contextmanager
def program_guard(main: Program, startup: Program | None = None) -> Iterator[None]:
    """Inside the ``with``, layers append to ``main`` and initializers to ``startup``.

    >>> main, startup = Program(), Program()
    >>> with program_guard(main, startup):
    ...     x = layers.data("x", [-1, 4], "float64")
    """
    if not isinstance(main, Program):
        raise ProgramError(f"program_guard needs a Program, got {type(main).__name__}")
    previous_main = switch_main_program(main)
    previous_startup = switch_startup_program(startup) if startup is not None else None
    try:
        yield
    finally:
        switch_main_program(previous_main)
        if startup is not None:
            switch_startup_program(previous_startup)


def current_block():
    """The block that layers append to now."""
    return _main_program.current_block()


__all__ = [
    "default_main_program", "default_startup_program", "switch_main_program", "switch_startup_program",
    "program_guard", "current_block"
]
