"""``gradgen show --plan`` lists the steps, and every fused step (region, product+update) with its ops."""
from __future__ import annotations

import pytest

from gradgen.framework import append_backward, optimizer
from gradgen.framework.backend.numpy import jit
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.tools.cli import main
from gradgen.framework.tools.plan_listing import default_feeds, plan_lines
from gradgen.program import Program, layers, program_guard
from tests.extras import require


def _program():
    main_p, startup = Program(), Program()
    with program_guard(main_p, startup):
        x = layers.data("x", [-1, 8], "float64")
        y = layers.data("y", [-1, 4], "float64")
        w = layers.create_parameter([8, 4], "float64", name="w")
        b = layers.create_parameter([4], "float64", name="b")
        loss = layers.reduce_mean(layers.square(layers.tanh(x @ w + b) - y))
        optimizer.Momentum(0.1, 0.9).apply_gradients(append_backward(loss))
    return main_p, loss


def test_listing_names_regions_and_their_ops():
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")
    prog, loss = _program()
    block = prog.global_block()
    assert default_feeds(block) == ["x", "y"]
    lines = plan_lines(block, fetches=[loss.name], options=PlanOptions())
    fused = [line for line in lines if "fused region" in line]
    assert any("tanh" in line and "reduce_mean" in line for line in fused)
    assert any("tanh_grad" in line for line in fused)
    assert lines[-1].endswith(f"{len(fused)} fused") and lines[-1].startswith(f"{len(lines) - 1} steps")


def test_the_command_prints_the_listing(tmp_path, capsys):
    require(None if jit.AVAILABLE else "numba", "pip install gradgen[fast]")
    prog, loss = _program()
    path = tmp_path / "main.json"
    prog.save(str(path))
    assert main(["show", str(path), "--plan", "--feed", "x,y", "--fetch", loss.name]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == plan_lines(prog.global_block(), ["x", "y"], [loss.name], PlanOptions())
    assert any("fused region" in line for line in printed)
