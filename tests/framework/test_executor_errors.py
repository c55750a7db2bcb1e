"""The executor's error model: feeds, missing inputs, kernel failures, NaN/Inf, atomicity."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, FeedError, NanInfError, Scope
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard


def _matmul_program():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[-1, 3], dtype="float64")
        w = layers.create_parameter([3, 2], "float64", name="w")
        out = x @ w
    return main, out


def _scope_with_w():
    scope = Scope()
    scope.set("w", np.ones((3, 2)))
    return scope


def test_feed_with_wrong_dtype_is_rejected_before_running():
    main, out = _matmul_program()
    with pytest.raises(FeedError, match=r"feed 'x' has dtype float32.*x: float64\[-1, 3\]"):
        Executor().run(main, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=[out], scope=_scope_with_w())


def test_feed_with_wrong_shape_is_rejected():
    main, out = _matmul_program()
    with pytest.raises(FeedError, match=r"feed 'x' has shape \[2, 4\].*x: float64\[-1, 3\]"):
        Executor().run(main, feed={"x": np.ones((2, 4))}, fetch_list=[out], scope=_scope_with_w())
    with pytest.raises(FeedError, match=r"shape \[3\]"):
        Executor().run(main, feed={"x": np.ones(3)}, fetch_list=[out], scope=_scope_with_w())


def test_python_lists_are_fed_with_the_declared_dtype():
    main, out = _matmul_program()
    (got,) = Executor().run(main, feed={"x": [[1, 2, 3]]}, fetch_list=[out], scope=_scope_with_w())
    np.testing.assert_array_equal(got, [[6.0, 6.0]])


def test_unknown_feed_name_is_rejected():
    main, out = _matmul_program()
    with pytest.raises(FeedError, match="feed 'nope' names no var"):
        Executor().run(main, feed={"x": np.ones((1, 3)), "nope": 1.0}, fetch_list=[out], scope=_scope_with_w())


def test_missing_feed_names_the_var_its_type_and_the_op():
    main, out = _matmul_program()
    with pytest.raises(FeedError, match=r"op #0 \(matmul\).*needs input x: float64\[-1, 3\].*neither fed"):
        Executor().run(main, feed={}, fetch_list=[out], scope=_scope_with_w())


def test_missing_persistable_value_says_to_run_startup():
    main, out = _matmul_program()
    with pytest.raises(ExecutionError, match=r"persistable w: float64\[3, 2\] is not in the scope.*startup"):
        Executor().run(main, feed={"x": np.ones((1, 3))}, fetch_list=[out], scope=Scope())


def test_scope_value_of_wrong_type_is_rejected():
    main, out = _matmul_program()
    scope = Scope()
    scope.set("w", np.ones((3, 5)))
    with pytest.raises(ExecutionError, match=r"scope value 'w' has shape \[3, 5\]"):
        Executor().run(main, feed={"x": np.ones((1, 3))}, fetch_list=[out], scope=scope)


def test_unknown_or_unavailable_fetch_is_rejected():
    main, out = _matmul_program()
    with pytest.raises(ExecutionError, match="fetch 'nope' names no var"):
        Executor().run(main, feed={"x": np.ones((1, 3))}, fetch_list=["nope"], scope=_scope_with_w())
    with pytest.raises(ExecutionError, match="fetch_list items"):
        Executor().run(main, feed={"x": np.ones((1, 3))}, fetch_list=[3], scope=_scope_with_w())


def _failing_program():
    """op 0 writes persistable w; op 1 is a matmul whose run-time shapes clash; its callsite is this file."""
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", shape=[2, -1], dtype="float64")
        b = layers.data("b", shape=[-1, 2], dtype="float64")
        w = layers.create_parameter([2], "float64", name="w")
        layers.assign(layers.scale(w, scale=5.0), output=w)
        out = layers.matmul(a, b)
    return main, out


def test_kernel_failure_names_block_op_inputs_and_callsite():
    main, out = _failing_program()
    scope = Scope()
    scope.set("w", np.ones(2))
    feed = {"a": np.ones((2, 3)), "b": np.ones((4, 2))}
    with pytest.raises(ExecutionError) as info:
        Executor().run(main, feed=feed, fetch_list=[out], scope=scope)
    message = str(info.value)
    assert "block 0, op #2 (matmul)" in message
    assert "created at test_executor_errors.py:" in message
    assert "X=a: float64[2, 3]" in message and "Y=b: float64[4, 2]" in message
    assert "ValueError" in message


def test_callsite_survives_json_round_trip():
    main, out = _failing_program()
    loaded = Program.from_json(main.to_json())
    scope = Scope()
    scope.set("w", np.ones(2))
    with pytest.raises(ExecutionError, match=r"op #2 \(matmul\), created at test_executor_errors.py:\d+"):
        Executor().run(loaded, feed={"a": np.ones((2, 3)), "b": np.ones((4, 2))}, fetch_list=[out.name], scope=scope)


@pytest.mark.parametrize("check_nan_inf", [False, True])
def test_failed_run_leaves_persistable_vars_untouched(check_nan_inf):
    main, out = _failing_program()
    scope = Scope()
    before = np.array([1.0, 2.0])
    scope.set("w", before.copy())
    with pytest.raises(ExecutionError):
        Executor(check_nan_inf=check_nan_inf).run(main, feed={"a": np.ones((2, 3)), "b": np.ones((4, 2))},
                                                  fetch_list=[out], scope=scope)
    np.testing.assert_array_equal(scope["w"], before)
    # The same program with consistent shapes does commit the update.
    Executor(check_nan_inf=check_nan_inf).run(main, feed={"a": np.ones((2, 3)), "b": np.ones((3, 2))},
                                              fetch_list=[out], scope=scope)
    np.testing.assert_array_equal(scope["w"], 5 * before)


def test_check_nan_inf_names_the_first_bad_op():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[3], dtype="float64")
        y = layers.log(x)          # op 0: NaN for a negative input
        z = layers.exp(y)          # op 1: propagates it
    feed = {"x": np.array([1.0, -1.0, 2.0])}
    with np.errstate(invalid="ignore"):
        (got,) = Executor().run(main, feed=feed, fetch_list=[z], scope=Scope())
        assert np.isnan(got[1])
        with pytest.raises(NanInfError, match=r"op #0 \(log\).*produced NaN in output " + y.name):
            Executor(check_nan_inf=True).run(main, feed=feed, fetch_list=[z], scope=Scope())


def test_check_nan_inf_reports_inf():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[2], dtype="float32")
        y = layers.exp(x)
    with np.errstate(over="ignore"), pytest.raises(NanInfError, match=r"op #0 \(exp\).*Inf"):
        Executor(check_nan_inf=True).run(main, feed={"x": np.array([1.0, 100.0], np.float32)}, fetch_list=[y],
                                         scope=Scope())


def test_op_type_without_kernel_is_reported_at_planning():
    main, out = _matmul_program()
    options = PlanOptions(kernels={t: f for t, f in KERNELS.items() if t != "matmul"})
    with pytest.raises(ExecutionError, match=r"op #0 \(matmul\).*no kernel"):
        Executor(options=options).run(main, feed={"x": np.ones((1, 3))}, fetch_list=[out], scope=_scope_with_w())


def test_run_time_shape_clash_inside_a_kernel_is_an_execution_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[-1, 4], dtype="float64")
        main.global_block().append_op("split", {"X": [x]}, {"Out": ["p0", "p1"]},
                                              {"axis": 0, "sections": [1, 1]})
    with pytest.raises(ExecutionError, match=r"op #0 \(split\).*sections \[1, 1\] do not add up to size 3.*x: float64\[3, 4\]"):
        Executor().run(main, feed={"x": np.ones((3, 4))}, fetch_list=["p0"], scope=Scope())


@pytest.mark.parametrize("check_nan_inf", [False, True])
def test_kernel_returning_too_few_outputs_is_reported(check_nan_inf):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", shape=[4], dtype="float64")
        main.global_block().append_op("split", {"X": [x]}, {"Out": ["p0", "p1"]}, {"axis": 0, "sections": [2, 2]})
    options = PlanOptions(kernels={**KERNELS, "split": lambda op: lambda v: (v[:2],)})
    with pytest.raises(ExecutionError, match=r"op #0 \(split\).*returned 1 outputs for 2 output vars"):
        Executor(check_nan_inf=check_nan_inf, options=options).run(main, feed={"x": np.ones(4)}, fetch_list=["p0"],
                                                                   scope=Scope())


def test_kernel_returning_several_outputs_for_one_var_is_reported_at_the_op():
    """Without the type checks too: not stored as a tuple in the var, to be found at a fetch or read as an array
    by a later op (the recurrent gradients once returned one)."""
    main = Program()
    with program_guard(main, Program()):
        out = layers.relu(layers.data("x", shape=[4], dtype="float64"))
    options = PlanOptions(kernels={**KERNELS, "relu": lambda op: lambda v: (v, v)})
    with pytest.raises(ExecutionError, match=r"op #0 \(relu\).*returned 2 outputs for 1 output var"):
        Executor(check_types=False, options=options).run(main, feed={"x": np.ones(4)}, fetch_list=[out], scope=Scope())
