"""(being written)"""
from __future__ import annotations

LOWERINGS: dict = {}
