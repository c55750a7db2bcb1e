"""``gradgen show --plan`` lists one step per op, in block order, and the vars each step frees."""
from __future__ import annotations

from gradgen.framework import append_backward, optimizer
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.framework.tools.cli import main
from gradgen.framework.tools.plan_listing import default_feeds, plan_lines
from gradgen.program import Program, layers, program_guard


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


def test_listing_has_one_step_per_op_in_block_order_and_frees_each_var_once():
    prog, loss = _program()
    block = prog.global_block()
    assert default_feeds(block) == ["x", "y"]
    lines = plan_lines(block, fetches=[loss.name], options=PlanOptions())
    assert lines[-1] == f"{len(block.ops)} steps for {len(block.ops)} ops, in block order"
    for at, (line, op) in enumerate(zip(lines, block.ops)):
        assert line.startswith(f"step {at}: op #{at} {op.type} -> ")
    freed = [n for line in lines[:-1] if "; frees " in line for n in line.split("; frees ")[1].split(", ")]
    assert len(freed) == len(set(freed)) and loss.name not in freed and "w" not in freed  # fetched, persistable


def test_the_command_prints_the_listing(tmp_path, capsys):
    prog, loss = _program()
    path = tmp_path / "main.json"
    prog.save(str(path))
    assert main(["show", str(path), "--plan", "--feed", "x,y", "--fetch", loss.name]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == plan_lines(prog.global_block(), ["x", "y"], [loss.name], PlanOptions())
