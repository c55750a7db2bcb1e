"""An executor, its runners and what they compiled are freed as soon as the last reference to the executor goes,
without the cyclic collector. A reference cycle (runners calling back into their executor through bound methods,
a trace context holding the closure over itself) left them to the collector's full passes, which come seldom
after ``append_backward`` (it hands its objects to the oldest generation): a process that ran a few hundred
random programs on the xla engine held every executable, reached the kernel's 65,530 memory maps and died in LLVM
("Cannot allocate memory", then a segfault)."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward, backends, optimizer
from gradgen.program import Program, layers, program_guard


def _training_program():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float32")
        w = layers.create_parameter([4, 3], "float32", name="w")
        loss = layers.reduce_mean(layers.square(layers.tanh(x @ w)))
        optimizer.SGD(0.1).apply_gradients(append_backward(loss))
    return main, startup, loss


def _runs(engine: str, main, startup, loss) -> weakref.ref:
    """A reference to an executor on ``engine`` that ran ``main`` on two batch sizes (two compiled steps on the
    compiled engines), dead once the executor is freed."""
    scope = Scope()
    exe = Executor(backend=engine)
    exe.run(startup, scope=scope)
    for batch in (2, 2, 5):
        exe.run(main, feed={"x": np.ones((batch, 4), "float32")}, fetch_list=[loss], scope=scope)
    return weakref.ref(exe)


@pytest.mark.parametrize("engine", [*backends(), "auto"])
def test_an_executor_and_its_compiled_steps_go_with_the_last_reference(engine):
    main, startup, loss = _training_program()
    # first the engine's imports: torch.fx keeps the frames its import ran under, the executor's among them (once
    # a process)
    _runs(engine, main, startup, loss)
    gc.collect()
    gc.disable()
    try:
        gone = _runs(engine, main, startup, loss)
        assert gone() is None, f"the {engine} executor outlived its last reference: " + \
            ", ".join(sorted({type(r).__qualname__ for r in gc.get_referrers(gone())}))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        # the runtime's and the engines' types only: a program is a cycle of its own (a block knows its program),
        # and another test's background compile may drop one meanwhile
        left = sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("gradgen.framework.")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == [], f"the {engine} engine's runs left cycles of {left}"
