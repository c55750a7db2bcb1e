"""A user-defined op (softsign, registered from user code) through every path: build, run, append_backward,
forward_gradients, finite differences of first and second order, save and load, check-grad and the CLI."""
from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from gradgen.framework import Executor, append_backward, forward_gradients, register_op, unregister_op
from gradgen.framework.tools.cli import main as cli
from gradgen.framework.user_ops import USER_OPS, UserOpError
from gradgen.grad_makers import GRAD_MAKERS
from gradgen.grad_makers.tangents import TANGENT_RULES
from gradgen.program import OP_SCHEMAS, Program, layers, program_guard
from gradgen.program.errors import GradgenError
from tests.forward.helpers import dot_product_sides
from tests.grad.checking import check_op_gradients

OPS_FILE = Path(__file__).with_name("softsign_op.py")


@pytest.fixture
def softsign():
    layer = runpy.run_path(str(OPS_FILE))["softsign"]
    yield layer
    unregister_op("softsign")


def _network(softsign):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 2], "float64", name="w")
        loss = layers.reduce_sum(softsign(x @ w), name="loss")
    return main, startup, loss


def test_nothing_is_registered_until_the_user_calls_register_op():
    assert "softsign" not in OP_SCHEMAS and "softsign" not in USER_OPS


def test_the_op_runs_and_trains_through_append_backward(softsign):
    main, startup, loss = _network(softsign)
    with program_guard(main, startup):
        ((w, gw),) = append_backward(loss)
    xv = np.array([[1.0, -2.0, 0.5], [0.3, 0.0, -1.0]])
    wv = np.arange(6.0).reshape(3, 2) / 6
    from gradgen.framework import Scope
    scope = Scope()
    scope.set("w", wv)
    value, grad = Executor().run(main, feed={"x": xv}, fetch_list=[loss, gw], scope=scope)
    z = xv @ wv
    np.testing.assert_allclose(value, np.sum(z / (1 + np.abs(z))), rtol=1e-14)
    np.testing.assert_allclose(grad, xv.T @ (1 / (1 + np.abs(z)) ** 2), rtol=1e-14)


@pytest.mark.parametrize("shape", [(3,), (2, 4), (1, 1, 5)])
def test_finite_differences_first_and_second_order(softsign, shape):
    rng = np.random.default_rng(len(shape))
    check_op_gradients(softsign, {"x": rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)})


def test_forward_mode_agrees_with_reverse_mode(softsign):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3], "float64")
        y = softsign(x)
    rng = np.random.default_rng(0)
    lhs, rhs = dot_product_sides(main, [y], [x], {"x": rng.standard_normal((2, 3))}, rng)
    assert lhs == pytest.approx(rhs, rel=1e-10)
    assert any(op.role == "forward_grad" and op.forward_op.type == "softsign" for op in main.global_block().ops)


def test_every_table_has_it_and_the_tables_stay_consistent(softsign):
    assert "softsign" in OP_SCHEMAS and "softsign" in GRAD_MAKERS and "softsign" in TANGENT_RULES
    assert set(GRAD_MAKERS) <= set(TANGENT_RULES)


def test_saved_programs_load_only_where_the_op_is_registered(softsign, tmp_path):
    main, startup, loss = _network(softsign)
    path = tmp_path / "main.json"
    main.save(path)
    unregister_op("softsign")
    with pytest.raises(GradgenError, match=r"unknown op type 'softsign'.*register it first with "
                                           r"gradgen\.framework\.register_op \(for the gradgen command: --ops FILE\)"):
        Program.load(path)
    runpy.run_path(str(OPS_FILE))
    loaded = Program.load(path)
    assert loaded.to_json() == main.to_json()


def test_the_command_line_registers_ops_with_ops_and_checks_gradients(tmp_path, capsys):
    layer = runpy.run_path(str(OPS_FILE))["softsign"]
    try:
        main = Program()
        with program_guard(main, Program()):
            x = layers.data("x", [2, 3], "float64")
            layers.reduce_sum(layer(x), name="loss")
        main.save(tmp_path / "p.json")
    finally:
        unregister_op("softsign")
    np.save(tmp_path / "x.npy", np.array([[1.0, -2.0, 0.5], [0.3, 0.7, -1.0]]))
    args = ["check-grad", str(tmp_path / "p.json"), "--loss", "loss", "--feed", f"x={tmp_path / 'x.npy'}"]
    assert cli(args) == 1
    assert "unknown op type 'softsign'" in capsys.readouterr().err
    try:
        assert cli(["--ops", str(OPS_FILE)] + args) == 0
        assert "ok" in capsys.readouterr().out
        unregister_op("softsign")
        assert cli(["--ops", str(OPS_FILE), "ops"]) == 0
        assert any(line.startswith("softsign ") and "differentiable" in line
                   for line in capsys.readouterr().out.splitlines())
    finally:
        unregister_op("softsign")


def test_registration_errors_say_what_is_wrong(softsign):
    with pytest.raises(UserOpError, match="op type 'softsign' exists already"):
        register_op("softsign", inputs=["X"], outputs=["Out"], kernel=np.abs)
    with pytest.raises(UserOpError, match="give both grad and tangent, or neither \\(the tangent rule is missing"):
        register_op("half", inputs=["X"], outputs=["Out"], kernel=lambda x: x / 2, grad=lambda g, op: {})
    with pytest.raises(UserOpError, match="list the op types its grad and tangent rules record in emits"):
        register_op("half", inputs=["X"], outputs=["Out"], kernel=lambda x: x / 2, grad=lambda g, op: {},
                    tangent=lambda g, op: {})
    with pytest.raises(UserOpError, match="'relu' is not a user-defined op"):
        unregister_op("relu")
    assert "half" not in OP_SCHEMAS


def test_attrs_reach_the_kernel_and_the_rules():
    shift = register_op("shifted_square", inputs=["X"], outputs=["Out"], attrs={"shift": 0.0},
                        kernel=lambda x, shift: (x - shift) ** 2, emits=("scale", "elementwise_mul"),
                        grad=lambda g, op: {"X": g.mul(op.grad("Out"), g.scale(op.input("X"), 2.0,
                                                                            -2.0 * op.attr("shift")))},
                        tangent=lambda g, op: {"Out": g.mul(op.tangent("X"), g.scale(op.input("X"), 2.0,
                                                                                  -2.0 * op.attr("shift")))})
    try:
        check_op_gradients(lambda x: shift(x, shift=1.5), {"x": np.array([0.1, 2.0, -1.0])})
    finally:
        unregister_op("shifted_square")


def test_the_docs_show_the_complete_example():
    doc = (Path(__file__).resolve().parents[2] / "design_docs" / "own_gradients.md").read_text()
    assert OPS_FILE.read_text() in doc


def test_an_op_without_rules_stops_both_modes_with_an_error_naming_it():
    from gradgen.framework import BackwardError, ForwardError, gradients

    floor = register_op("floor_user", inputs=["X"], outputs=["Out"], kernel=np.floor)
    try:
        main = Program()
        with program_guard(main, Program()):
            x = layers.data("x", [3], "float64")
            y = layers.sin(floor(x))
            before = main.to_json()
            with pytest.raises(ForwardError, match=r"block 0, op #0 \(floor_user\) has no tangent rule, but tangents "
                                                   r"reach it through 'x'"):
                forward_gradients(y, [x])
            assert main.to_json() == before  # the failed pass took out what it had added
            with pytest.raises(BackwardError, match=r"op #0 \(floor_user\) has no grad maker"):
                gradients(y, [x])
    finally:
        unregister_op("floor_user")


def test_a_failure_inside_a_branch_names_the_users_op_and_leaves_the_program_as_it_was():
    from gradgen.framework import ForwardError

    floor = register_op("floor_user", inputs=["X"], outputs=["Out"], kernel=np.floor)
    try:
        main = Program()
        with program_guard(main, Program()):
            x = layers.data("x", [3], "float64")
            p = layers.data("p", [], "bool")
            y = layers.cond(p, lambda: layers.sin(floor(x)), lambda: layers.cos(x))
            before, blocks = main.to_json(), len(main.blocks)
            with pytest.raises(ForwardError, match=r"block 1, op #0 \(floor_user\) has no tangent rule"):
                forward_gradients(y, [x])
        assert main.to_json() == before and len(main.blocks) == blocks
    finally:
        unregister_op("floor_user")
