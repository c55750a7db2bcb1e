"""The explain page as one self-contained HTML file: the model as JSON, the style and the script inline.

The CSS and JS are package data files beside this module (``page.css``,
``page.js``), read once and pasted into the page, so the file opens from disk
with no network. The model JSON is escaped so no var name can end the script.
"""
from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _json_for_script(model: dict[str, Any]) -> str:
    text = json.dumps(model, separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(model: dict[str, Any], title: str = "gradgen program", embedded: bool = False) -> str:
    """The page for ``model`` (``page_model``'s data); ``embedded`` gives a fragment for Jupyter's output cell.

    Everything sits in one ``div.gradgen-explain``: the style is scoped to it and the script finds its
    elements under it, so several pages can share one notebook.
    """
    blocks = model["blocks"]
    ops = sum(len(b["ops"]) for b in blocks)
    counts = {}
    for b in blocks:
        for op in b["ops"]:
            counts[op["role"]] = counts.get(op["role"], 0) + 1
    summary = f"{len(blocks)} block(s), {ops} ops: " + ", ".join(f"{n} {r}" for r, n in counts.items())
    summary += f"; runs on the {model.get('backend', 'numpy')} backend" + (
        "" if model.get("backend", "numpy") == "numpy" else
        " (its compiler plans the buffers: the memory chart below is the numpy plan's)")
    body = (f"<div class=\"gradgen-explain\"><style>{_asset('page.css')}</style>"
            f"<div class=\"gg-header\"><b>{html.escape(title)}</b> &mdash; {html.escape(summary)}. Click an op to "
            "see what it was made for; click a var for its facts.</div>"
            "<div class=\"gg-main\"><div class=\"gg-ops\"></div>"
            "<div class=\"gg-facts\">Click an op or a var.</div></div>"
            "<div class=\"gg-memory\"></div>"
            f"<script type=\"application/json\" class=\"gg-model\">{_json_for_script(model)}</script>"
            f"<script>{_asset('page.js')}</script></div>")
    if embedded:
        return body
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body style=\"margin:0\">{body}</body></html>\n")


__all__ = ["render_page"]
