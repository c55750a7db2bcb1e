"""Learning-rate schedules built into the program, under Paddle's names.

    lr = layers.exponential_decay(learning_rate=0.1, decay_steps=100, decay_rate=0.5, staircase=True)
    optimizer.SGD(learning_rate=lr).minimize(loss)

Every schedule reads one persistable step counter per program,
``@LR_DECAY_COUNTER@`` (int64, started at -1 by the startup program). The
first schedule puts an ``increment`` op at the very front of the main
program, so run k (counting from 0) sees step k, as in Paddle. Schedule ops
have the ``optimize`` role: ``clone(for_test=True)`` and pruning to a
prediction drop them with the updates they serve.
"""
from __future__ import annotations

from typing import Sequence

from ..dtypes import normalize_dtype
from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..variable import Variable

COUNTER = "@LR_DECAY_COUNTER@"


def step_counter() -> Variable:
    """The program's step counter (made, with its startup value and its ``increment`` op, on first use)."""
    main = default_main_program()
    block = main.global_block()
    if COUNTER in block.vars:
        return block.vars[COUNTER]
    counter = block.create_var(COUNTER, (), "int64", persistable=True, stop_gradient=True)
    startup = default_startup_program().global_block()
    if COUNTER not in startup.vars:
        startup.create_var(COUNTER, (), "int64", persistable=True, stop_gradient=True)
        startup.append_op("fill_constant", {}, {"Out": [COUNTER]}, {"shape": [], "dtype": "int64", "value": -1.0})
    block.insert_op(0, "increment", {"X": [COUNTER]}, {"Out": [COUNTER]}, {"step": 1.0}, role="optimize")
    return counter


def _schedule(op_type: str, attrs: dict, inputs: dict | None = None) -> Variable:
    block = default_main_program().global_block()
    name = block.program.unique_name("learning_rate")
    block.append_op(op_type, {"Step": [step_counter().name], **(inputs or {})}, {"Out": [name]}, attrs,
                    role="optimize")
    out = block.var(name)
    out.stop_gradient = True
    return out


def piecewise_decay(boundaries: Sequence[int], values: Sequence[float], dtype="float32") -> Variable:
    """``values[0]`` until step ``boundaries[0]``, then ``values[1]``, ...: one more value than boundaries."""
    return _schedule("piecewise_decay", {"boundaries": [int(b) for b in boundaries],
                                         "values": [float(v) for v in values], "dtype": normalize_dtype(dtype)})


def exponential_decay(learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False,
                      dtype="float32") -> Variable:
    """``learning_rate * decay_rate ** (step / decay_steps)`` (the exponent floored with ``staircase``)."""
    return _schedule("exponential_decay", {"learning_rate": float(learning_rate), "decay_steps": int(decay_steps),
                                           "decay_rate": float(decay_rate), "staircase": bool(staircase),
                                           "dtype": normalize_dtype(dtype)})


def cosine_decay(learning_rate: float, step_each_epoch: int, epochs: int, dtype="float32") -> Variable:
    """``learning_rate * (cos(pi * epoch / epochs) + 1) / 2`` with ``epoch = step // step_each_epoch``."""
    return _schedule("cosine_decay", {"learning_rate": float(learning_rate), "step_each_epoch": int(step_each_epoch),
                                      "epochs": int(epochs), "dtype": normalize_dtype(dtype)})


def linear_lr_warmup(learning_rate: float | Variable, warmup_steps: int, start_lr: float, end_lr: float,
                     dtype="float32") -> Variable:
    """From ``start_lr`` linearly to ``end_lr`` over ``warmup_steps`` steps, then ``learning_rate``.

    ``learning_rate`` is a number or another schedule (warm up, then decay).
    """
    block = default_main_program().global_block()
    if isinstance(learning_rate, Variable):
        after = learning_rate
    elif isinstance(learning_rate, (int, float)):
        name = block.program.unique_name("learning_rate")
        block.append_op("fill_constant", {}, {"Out": [name]},
                        {"shape": [], "dtype": normalize_dtype(dtype), "value": float(learning_rate)}, role="optimize")
        after = block.var(name)
    else:
        raise ProgramError(f"learning_rate must be a number or a schedule's Variable, got "
                           f"{type(learning_rate).__name__}")
    return _schedule("linear_lr_warmup", {"warmup_steps": int(warmup_steps), "start_lr": float(start_lr),
                                          "end_lr": float(end_lr)}, {"LearningRate": [after.name]})


__all__ = ["COUNTER", "step_counter", "piecewise_decay", "exponential_decay", "cosine_decay", "linear_lr_warmup"]
