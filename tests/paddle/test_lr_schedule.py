"""Learning-rate schedules as ops: values per step, use by the optimizers, saving, test clones and errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import OpError, Program, ProgramError, layers, program_guard
from gradgen.program.layers.lr_schedule import COUNTER


def _values(make, steps):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        lr = make()
    exe, scope = Executor(check_types=True), Scope()
    exe.run(startup, scope=scope)
    return [float(exe.run(main, fetch_list=[lr], scope=scope)[0]) for _ in range(steps)], lr, main, scope


SCHEDULES = {
    "piecewise": (lambda: layers.piecewise_decay([2, 5], [1.0, 0.5, 0.1]),
                  lambda s: 1.0 if s < 2 else 0.5 if s < 5 else 0.1),
    "exponential": (lambda: layers.exponential_decay(0.1, 3, 0.5, dtype="float64"), lambda s: 0.1 * 0.5 ** (s / 3)),
    "staircase": (lambda: layers.exponential_decay(0.1, 3, 0.5, staircase=True), lambda s: 0.1 * 0.5 ** (s // 3)),
    "cosine": (lambda: layers.cosine_decay(0.2, step_each_epoch=2, epochs=3),
               lambda s: 0.2 * 0.5 * (math.cos((s // 2) * math.pi / 3) + 1)),
    "warmup": (lambda: layers.linear_lr_warmup(0.3, warmup_steps=4, start_lr=0.0, end_lr=0.2),
               lambda s: 0.2 * s / 4 if s < 4 else 0.3),
    "warmup_then_decay": (lambda: layers.linear_lr_warmup(layers.exponential_decay(0.3, 2, 0.1), 3, 0.1, 0.3),
                          lambda s: 0.1 + 0.2 * s / 3 if s < 3 else 0.3 * 0.1 ** (s / 2)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_each_run_k_sees_step_k(name):
    make, reference = SCHEDULES[name]
    got, lr, _, scope = _values(make, 10)
    np.testing.assert_allclose(got, [reference(s) for s in range(10)], rtol=1e-6)
    assert lr.shape == () and int(scope[COUNTER]) == 9


def test_schedules_share_one_counter_and_one_increment():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        layers.piecewise_decay([1], [1.0, 2.0])
        layers.exponential_decay(1.0, 1, 0.5)
    ops = main.global_block().ops
    assert [op.type for op in ops] == ["increment", "piecewise_decay", "exponential_decay"]
    assert {op.role for op in ops} == {"optimize"}
    assert [op.type for op in startup.global_block().ops] == ["fill_constant"]


def _regression(lr_of):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [None, 2], "float64")
        w = layers.create_parameter([2, 1], "float64", name="w")
        loss = layers.mean(layers.square(x @ w))
        test = main.clone(for_test=True)
        lr = lr_of()
        optimizer.SGD(learning_rate=lr).minimize(loss)
    return main, startup, test, loss, lr, w


def test_sgd_steps_by_the_scheduled_rate_cast_to_the_parameters_dtype():
    main, startup, _, loss, lr, w = _regression(lambda: layers.piecewise_decay([2], [0.1, 0.01]))
    assert lr.dtype == "float32"
    assert "cast" in [op.type for op in main.global_block().ops]
    exe, scope = Executor(check_types=True), Scope()
    exe.run(startup, scope=scope)
    xs = np.array([[1.0, 2.0], [0.5, -1.0]])
    for step in range(4):
        before = scope["w"].copy()
        grad = 2 * xs.T @ (xs @ before) / xs.shape[0]
        exe.run(main, feed={"x": xs}, fetch_list=[loss], scope=scope)
        rate = np.float64(np.float32(0.1 if step < 2 else 0.01))
        np.testing.assert_allclose(scope["w"], before - rate * grad, rtol=1e-12)


def test_momentum_and_adam_take_a_schedule():
    for make in (lambda lr: optimizer.Momentum(lr, 0.9), lambda lr: optimizer.Adam(lr)):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [None, 2], "float32")
            loss = layers.mean(layers.square(layers.fc(x, 1)))
            make(layers.exponential_decay(0.1, 10, 0.5)).minimize(loss)
        exe, scope = Executor(check_types=True), Scope()
        exe.run(startup, scope=scope)
        values = [float(exe.run(main, feed={"x": np.ones((3, 2), np.float32)}, fetch_list=[loss], scope=scope)[0])
                  for _ in range(5)]
        assert values[-1] < values[0]


def test_the_schedule_is_saved_with_the_program_and_dropped_from_test_clones():
    main, startup, test, loss, lr, _ = _regression(lambda: layers.exponential_decay(0.5, 2, 0.5, staircase=True))
    text = str(main)
    assert "increment(X=@LR_DECAY_COUNTER@)" in text and "exponential_decay(Step=@LR_DECAY_COUNTER@" in text
    loaded = Program.from_json(main.to_json())
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    got = [float(exe.run(loaded, feed={"x": np.ones((1, 2))}, fetch_list=[lr.name], scope=scope)[0])
           for _ in range(5)]
    assert got == [0.5, 0.5, 0.25, 0.25, 0.125]
    for clone in (test, main.clone(for_test=True)):
        assert not any(op.type in ("increment", "exponential_decay") for op in clone.global_block().ops)


@pytest.mark.parametrize("make,message", [
    (lambda: layers.piecewise_decay([1, 2], [1.0, 2.0]), "one more value than boundaries"),
    (lambda: layers.piecewise_decay([3, 2], [1.0, 2.0, 3.0]), "boundaries must increase"),
    (lambda: layers.exponential_decay(0.1, 0, 0.5), "decay_steps must be positive"),
    (lambda: layers.cosine_decay(0.1, 2, 0), "epochs must be positive"),
    (lambda: layers.linear_lr_warmup(0.1, 0, 0.0, 0.1), "warmup_steps must be positive"),
])
def test_bad_schedules_are_op_errors(make, message):
    with program_guard(Program(), Program()):
        with pytest.raises(OpError, match=message):
            make()


def test_bad_learning_rates_are_errors():
    with program_guard(Program(), Program()):
        with pytest.raises(ProgramError, match="must be a float scalar"):
            optimizer.SGD(layers.data("v", [3], "float32"))
        with pytest.raises(ProgramError, match="must be positive"):
            optimizer.SGD(0.0)
        with pytest.raises(ProgramError, match="a number or a schedule"):
            layers.linear_lr_warmup("fast", 3, 0.0, 0.1)
