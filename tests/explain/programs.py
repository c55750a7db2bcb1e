"""Programs the explain tests look at: the built-in examples after minimize, a deep MLP, a second-order program."""
from __future__ import annotations

from gradgen.framework import append_backward, gradients
from gradgen.framework.tools.examples import EXAMPLES
from gradgen.program import Program, layers, program_guard


def trained_example(name: str) -> Program:
    ex = EXAMPLES[name]()
    with program_guard(ex.main, ex.startup):
        ex.make_optimizer().minimize(ex.loss)
    return ex.main


def deep_mlp(layers_count: int = 50, width: int = 64) -> Program:
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, width], "float64")
        for i in range(layers_count):
            h = layers.tanh(h @ layers.create_parameter([width, width], "float64", name=f"w{i}"))
        append_backward(layers.mean(h))
    return main


def shared_use_program() -> Program:
    """``tanh_0`` read by three ops, so its gradient is a ``sum`` of three contributions."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 3], "float64", name="w")
        t = layers.tanh(x @ w)
        loss = layers.reduce_sum(t * t + layers.sin(t))
        append_backward(loss)
    return main


def second_order_program() -> Program:
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        x.stop_gradient = False
        y = layers.reduce_sum(layers.tanh(x) * x)
        (dx,) = gradients(y, [x])
        gradients(layers.reduce_sum(dx * dx), [x])
    return main
