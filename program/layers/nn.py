"""nn layers."""
from __future__ import annotations
