"""gradgen imports and runs without the optional onnx packages; the ONNX tools then say what to install."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["onnx"] = None          # as if onnx were not installed
sys.modules["onnxruntime"] = None
from gradgen.framework import Executor, export_onnx
from gradgen.framework.tools.onnx import OnnxUnavailableError
from gradgen.framework.tools.examples import EXAMPLES
ex = EXAMPLES["mlp"]()
Executor().run(ex.startup)
try:
    export_onnx(ex.main)
except OnnxUnavailableError as e:
    print("refused:", e)
"""


def test_without_onnx_gradgen_runs_and_the_export_says_what_to_install():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: the ONNX tools need the 'onnx' package: pip install 'gradgen[onnx]'" in done.stdout
