"""Test-suite settings that every test shares.

Every ``Executor()`` a test makes checks that each kernel returns the dtype and shape its output var declares
(``Executor(check_types=...)`` defaults to the environment variable ``GRADGEN_CHECK_TYPES``), so a kernel that
drifts from its schema fails the suite. Run with ``GRADGEN_CHECK_TYPES=0`` to see the suite without the checks.
"""
from __future__ import annotations

import os

from gradgen.framework.runtime.executor import CHECK_TYPES_ENV

os.environ.setdefault(CHECK_TYPES_ENV, "1")
