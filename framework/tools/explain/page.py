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
    """The page for ``model`` (``page_model``'s data); ``embedded`` gives a fragment for Jupyter's output cell."""
    blocks = model["blocks"]
    ops = sum(len(b["ops"]) for b in blocks)
    counts = {}
    for b in blocks:
        for op in b["ops"]:
            counts[op["role"]] = counts.get(op["role"], 0) + 1
    summary = f"{len(blocks)} block(s), {ops} ops: " + ", ".join(f"{n} {r}" for r, n in counts.items())
    body = (f"<style>{_asset('page.css')}</style>"
            f"<header><b>{html.escape(title)}</b> &mdash; {html.escape(summary)}. Click an op to see what it was "
            "made for; click a var for its facts.</header>"
            "<main><div id=\"ops\"></div><aside id=\"facts\">Click an op or a var.</aside></main>"
            "<section id=\"memory\"></section>"
            f"<script type=\"application/json\" id=\"model\">{_json_for_script(model)}</script>"
            f"<script>{_asset('page.js')}</script>")
    if embedded:
        return f"<div class=\"gradgen-explain\">{body}</div>"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body>{body}</body></html>\n")


__all__ = ["render_page"]
