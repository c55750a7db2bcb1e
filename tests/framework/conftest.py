"""Lets the kernel tests import their helper modules (op_harness, op_cases) from this directory."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
