"""Tests that need an optional extra or a system package: skipped where it is missing, unless CI requires it.

The README's test command (and so ``.ci/run``) installs every extra and sets ``GRADGEN_REQUIRE_EXTRAS=1``;
there a missing piece fails the test instead of skipping it, so CI never passes by skipping.
"""
from __future__ import annotations

import os

import pytest

__all__ = ["require"]


def require(missing: str | None, hint: str, *, module_level: bool = False) -> None:
    """Skip (or, under ``GRADGEN_REQUIRE_EXTRAS``, fail) when ``missing`` names something absent."""
    if missing is None:
        return
    if os.environ.get("GRADGEN_REQUIRE_EXTRAS"):
        pytest.fail(f"GRADGEN_REQUIRE_EXTRAS is set but {missing} is missing ({hint})", pytrace=False)
    pytest.skip(f"{missing} is missing: {hint}", allow_module_level=module_level)
