"""``gradgen check-grad`` chooses its step and tolerances by dtype and warns before long sweeps."""
import subprocess
import sys
import threading

import numpy as np

from gradgen.framework.tools.gradcheck import TOLERANCES, tolerances_for
from gradgen.program import Program, layers, program_guard

GRADGEN = [sys.executable, "-m", "gradgen.framework"]


def _smooth_program(tmp_path, dtype, width=4):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, width], dtype)
        w = layers.data("w", [width, 3], dtype)
        layers.reduce_mean(layers.square(layers.tanh(x @ w)), name="loss")
    main.save(tmp_path / "main.json")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((8, width)).astype(dtype))
    np.save(tmp_path / "w.npy", rng.standard_normal((width, 3)).astype(dtype))
    return [tmp_path / "main.json", "--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"w={tmp_path / 'w.npy'}",
            "--loss", "loss"]


def test_tolerances_follow_the_least_precise_dtype():
    assert tolerances_for(["float64"]) == TOLERANCES["float64"]
    assert tolerances_for(["float64", "float32"]) == TOLERANCES["float32"]
    assert tolerances_for([]) == TOLERANCES["float64"]


def test_float32_programs_pass_with_the_float32_step(tmp_path):
    args = _smooth_program(tmp_path, "float32")
    result = subprocess.run(GRADGEN + ["check-grad", *map(str, args)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step 0.001" in result.stdout and "MISMATCH" not in result.stdout
    # the old fixed step of 1e-6 is below float32's resolution of the loss: the check cannot pass
    result = subprocess.run(GRADGEN + ["check-grad", *map(str, args), "--delta", "1e-6", "--rtol", "1e-5",
                                       "--atol", "1e-7"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "MISMATCH" in result.stdout


def test_large_sweeps_are_announced_before_they_start(tmp_path):
    args = _smooth_program(tmp_path, "float64", width=2000)  # x and w: 16000 + 6000 elements
    proc = subprocess.Popen(GRADGEN + ["check-grad", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watchdog = threading.Timer(60, proc.kill)  # never hang: no warning within a minute fails the test
    watchdog.start()
    try:
        line = proc.stderr.readline()
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait(timeout=30)
    assert "warning: checking 22000 elements runs the program 44000 times" in line
