"""The explain page: a program's forward and backward ops side by side, linked, with its memory timeline.

    html = explain_page(program, feed_shapes={"x": [64, 1000]})

``page_model`` is the plain data behind it (tested directly); ``render_page``
turns it into one self-contained HTML file. ``Program.explain`` and
``Program._repr_html_`` reach this through ``gradgen.program.display``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .model import default_feed_shapes, op_id, page_model
from .page import render_page


def explain_page(program, feed_shapes: Mapping[str, Sequence[int]] | None = None, embedded: bool = False,
                 title: str = "gradgen program", backend: str = "numpy") -> str:
    """The HTML page explaining ``program``; ``feed_shapes`` sizes -1 dims (default 1); ``backend`` names the
    engine that runs it (the header says so)."""
    return render_page({**page_model(program, feed_shapes), "backend": backend}, title=title, embedded=embedded)


__all__ = ["explain_page", "page_model", "render_page", "default_feed_shapes", "op_id"]
