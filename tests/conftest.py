"""Test-suite settings that every test shares.

Every ``Executor()`` a test makes checks that each kernel returns the dtype and shape its output var declares
(``Executor(check_types=...)`` defaults to the environment variable ``GRADGEN_CHECK_TYPES``), so a kernel that
drifts from its schema fails the suite. Run with ``GRADGEN_CHECK_TYPES=0`` to see the suite without the checks.

``Executor()`` runs on the numpy reference here (``GRADGEN_BACKEND=numpy``), not on the engine a user's
``Executor()`` picks by measurement (``backend="auto"``): every test then sees one engine whatever the timings,
and no test starts background compiles. The engines are compared with each other by tests of their own
(tests/backends, tests/differential), and the default's choice by tests/backends/test_auto.py. Nor does a test's
``Executor(backend="auto")`` start from a choice an earlier run remembered (``GRADGEN_REMEMBER_CHOICES=0``): each
trial is its own; tests/backends/test_remembered.py turns it on in a folder of its own.

Where the environment forbids writing bytecode (``PYTHONDONTWRITEBYTECODE``, which keeps ``__pycache__`` folders
out of the source tree), the suite writes it to a folder of its own outside the tree instead (``BYTECODE``, through
``PYTHONPYCACHEPREFIX``, which its subprocesses inherit): each of the few hundred ``gradgen`` commands, MPI ranks
and worker processes the suite starts would otherwise compile gradgen's modules from source again (0.37 s against
0.15 s to import ``gradgen.framework``), and pytest rewrite every test module's asserts again in each worker.
Measured, 2 cores: ``tests/cli`` 32.0 s as it was, 30.2 s with the folder cold and 22.4 s warm; the whole suite
606 s before, 449 s with the folder cold (it then holds 123 MiB: with a prefix set, Python reads bytecode only
there, so the installed packages' modules are compiled into it once too) and 467 s warm. A user's own
``PYTHONPYCACHEPREFIX`` is left as it is.

The longest test, the differential one (its own two processes compile a few thousand small XLA programs), is
collected first, so that on the README's two test processes (``-n 2``) the rest of the suite runs beside it
rather than after it.
"""
from __future__ import annotations

import os
import sys
import tempfile

from gradgen.framework.backend import BACKEND_ENV
from gradgen.framework.runtime.executor import CHECK_TYPES_ENV
from gradgen.framework.runtime.remembered import REMEMBER_ENV

os.environ.setdefault(CHECK_TYPES_ENV, "1")
os.environ.setdefault(BACKEND_ENV, "numpy")
os.environ.setdefault(REMEMBER_ENV, "0")

BYTECODE = os.path.join(tempfile.gettempdir(), "gradgen-tests-bytecode")
"""Where the suite's processes keep compiled bytecode when the environment forbids writing it into the tree."""

if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = BYTECODE
    sys.dont_write_bytecode = False


LONGEST_FIRST = ("tests/differential/test_engines_agree.py::test_every_engine_agrees",)
"""Node id prefixes of the tests run before all others (the module docstring says why)."""


def pytest_collection_modifyitems(items: list) -> None:
    """Move ``LONGEST_FIRST``'s tests to the front, keeping every other test's order."""
    first = [item for item in items if item.nodeid.startswith(LONGEST_FIRST)]
    if first:
        rest = [item for item in items if not item.nodeid.startswith(LONGEST_FIRST)]
        items[:] = first + rest
