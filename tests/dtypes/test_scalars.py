"""Python numbers beside Variables: the declared dtype is the computed one (design_docs/ir.md, "dtype rules")."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import OpError, ProgramError

T = np.array([-3, 0, 1, 7], dtype=np.int64)

INT_RESULTS = {
    "t + 1": (lambda t: t + 1, T + 1),
    "1 + t": (lambda t: 1 + t, 1 + T),
    "t - 2": (lambda t: t - 2, T - 2),
    "5 - t": (lambda t: 5 - t, 5 - T),
    "t * 3": (lambda t: t * 3, T * 3),
    "3 * t": (lambda t: 3 * t, 3 * T),
    "-t": (lambda t: -t, -T),
    "scale(t, 2, 1)": (lambda t: layers.scale(t, 2, 1), 2 * T + 1),
    "scale(t, -1.0)": (lambda t: layers.scale(t, -1.0), -T),
    "t ** 2": (lambda t: t ** 2, T ** 2),
    "t ** 3": (lambda t: t ** 3, T ** 3),
    "t + 2**60 + 1": (lambda t: t + (2 ** 60 + 1), T + (2 ** 60 + 1)),
    "t * 2**40": (lambda t: t * 2 ** 40, T * 2 ** 40),
}

FLOAT_RESULTS = {
    "t * 2.5": (lambda t: t * 2.5, T * 2.5),
    "2.5 * t": (lambda t: 2.5 * t, 2.5 * T),
    "t + 0.5": (lambda t: t + 0.5, T + 0.5),
    "t / 2": (lambda t: t / 2, T / 2),
    "t ** -1": (lambda t: t ** -1, np.array([-1 / 3, np.inf, 1.0, 1 / 7])),
    "t ** 0.5 of |t|": (lambda t: layers.abs(t) ** 0.5, np.abs(T) ** 0.5),
    "maximum(t, 0.5)": (lambda t: layers.maximum(t, 0.5), np.maximum(T, 0.5)),
}


def _run(build, feed_value, dtype):
    main = Program()
    with program_guard(main, Program()):
        t = layers.data("t", [-1], dtype)
        out = build(t)
    with np.errstate(divide="ignore"):
        (value,) = Executor(check_types=True).run(main, feed={"t": feed_value}, fetch_list=[out], scope=Scope())
    return out, value


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("case", INT_RESULTS)
def test_an_int_var_and_an_int_number_stay_int_exactly(case, dtype):
    build, want = INT_RESULTS[case]
    if dtype == "int32" and np.abs(want).max() >= 2 ** 31:
        with pytest.raises(OpError, match="outside the range of int32"):
            _run(build, T.astype(dtype), dtype)
        return
    out, value = _run(build, T.astype(dtype), dtype)
    assert out.dtype == dtype and value.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("case", FLOAT_RESULTS)
def test_an_int_var_beside_a_float_number_is_promoted_to_float64(case):
    build, want = FLOAT_RESULTS[case]
    out, value = _run(build, T, "int64")
    assert out.dtype == "float64" and value.dtype == np.float64
    np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_float_var_keeps_its_dtype_beside_any_number(dtype):
    x = np.array([0.5, -2.0, 3.0], dtype=dtype)
    for build in (lambda v: v + 1, lambda v: 2 * v, lambda v: v / 4, lambda v: -v, lambda v: 1 - v, lambda v: v ** 3):
        out, value = _run(build, x, dtype)
        assert out.dtype == dtype and value.dtype == np.dtype(dtype)


def test_scale_on_an_int_var_refuses_a_fraction_instead_of_truncating():
    main = Program()
    with program_guard(main, Program()):
        t = layers.data("t", [3], "int64")
        with pytest.raises(OpError, match=r"scale 2.5 is not a whole number.*cast X to a float dtype"):
            layers.scale(t, 2.5)
        with pytest.raises(OpError, match="bias 0.5 is not a whole number"):
            layers.scale(t, 1, 0.5)


def test_arithmetic_on_bools_is_refused_at_build_time():
    main = Program()
    with program_guard(main, Program()):
        b = layers.data("b", [3], "bool")
        for build in (lambda: b + 1, lambda: b * 2.0, lambda: layers.scale(b, 2.0)):
            with pytest.raises(OpError, match="X must be float16, float32, float64, int32 or int64, got bool"):
                build()
        with pytest.raises(OpError, match="got bool"):
            layers.divide(b, b)


def test_a_while_loop_counter_t_plus_1_stays_an_index_and_its_gradient_runs():
    """The loop of the issue: ``[t + 1, ...]`` and ``gather(xs, t)``; forward and gradient against numpy."""
    rng = np.random.default_rng(0)
    xs, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("xs", [4, 3], "float64")
        x.stop_gradient = False
        h0 = layers.data("w", [3], "float64")
        h0.stop_gradient = False
        t0 = layers.fill_constant([], "int64", 0)
        t, h = layers.while_loop(lambda t, h: layers.less_than(t, layers.fill_constant([], "int64", 4)),
                                 lambda t, h: [t + 1, layers.tanh(h * layers.gather(x, t))], [t0, h0])
        loss = layers.reduce_sum(h)
        gx, gw = gradients([loss], [x, h0])
    got_t, got_h, got_gx, got_gw = Executor(check_types=True).run(
        main, feed={"xs": xs, "w": w}, fetch_list=[t, h, gx, gw], scope=Scope())
    assert got_t.dtype == np.int64 and got_t == 4
    want_h, hs = w, []
    for k in range(4):
        hs.append(want_h)
        want_h = np.tanh(want_h * xs[k])
    np.testing.assert_allclose(got_h, want_h, rtol=1e-13)
    g, want_gx = np.ones(3), np.zeros((4, 3))  # reverse sweep by hand
    for k in reversed(range(4)):
        d = g * (1 - np.tanh(hs[k] * xs[k]) ** 2)
        want_gx[k] = d * hs[k]
        g = d * xs[k]
    np.testing.assert_allclose(got_gx, want_gx, rtol=1e-12)
    np.testing.assert_allclose(got_gw, g, rtol=1e-12)


@pytest.mark.parametrize("build, want", [
    (lambda t: layers.less_than(t, 2.5), T < 2.5),
    (lambda t: layers.equal(t, 1), T == 1),
    (lambda t: layers.greater_equal(7, t), 7 >= T),
    (lambda t: layers.where(layers.less_than(t, 1), t, 0.5), np.where(T < 1, T, 0.5)),
    (lambda t: layers.where(layers.less_than(t, 1), 2 ** 60, t), np.where(T < 1, 2 ** 60, T)),
])
def test_comparisons_and_where_promote_like_arithmetic(build, want):
    """``t < 2.5`` compares with 2.5 (it used to become ``t < 2``, the number truncated into an int64 constant)."""
    out, value = _run(build, T, "int64")
    assert value.dtype == np.dtype(out.dtype) == want.dtype
    np.testing.assert_array_equal(value, want)


def test_a_float_constant_beyond_its_dtype_is_refused_rather_than_made_inf():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float16")
        with pytest.raises(OpError, match=r"\(fill_constant\).*100000.0 is beyond the largest finite float16"):
            layers.maximum(x, 1e5)


def test_a_number_too_large_for_any_float_is_a_program_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        with pytest.raises(ProgramError, match=r"the number 1000.* beside var 'x' \(float64\) is too large"):
            x + 10 ** 400
        t = layers.data("t", [3], "int64")
        with pytest.raises(OpError, match="outside the range of int64"):
            t + 2 ** 64
