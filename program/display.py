"""The hook behind ``Program.explain`` and ``Program._repr_html_``.

The explain page needs the executor's plan and the memory analysis, which live
in ``gradgen.framework``; ``program/`` may not import upward. So the page
builder is handed in: ``gradgen.framework`` calls ``install_page_builder`` once,
explicitly, in its ``__init__`` (importing ``gradgen.framework`` is what makes
the page available). Without it, ``explain`` says what to import.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import ProgramError

_page_builder: list[Callable[..., str]] = []


def install_page_builder(build: Callable[..., str]) -> None:
    """Make ``build(program, **options) -> html`` the page ``Program.explain`` returns (replacing any earlier one)."""
    _page_builder[:] = [build]


def explain_page(program, **options: Any) -> str:
    """The explain page of ``program`` from the installed builder."""
    if not _page_builder:
        raise ProgramError("the explain page is built by gradgen.framework: `import gradgen.framework` first")
    return _page_builder[0](program, **options)


def notebook_html(program) -> str | None:
    """The page as a fragment for Jupyter, or None (Jupyter then shows ``repr``) when no builder is installed."""
    if not _page_builder:
        return None
    return _page_builder[0](program, embedded=True)


__all__ = ["explain_page", "install_page_builder", "notebook_html"]
