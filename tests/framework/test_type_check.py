"""Executor(check_types=True) catches a kernel that breaks the type its op's schema promised."""
import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from gradgen.framework.backend.numpy.kernels import KERNELS
from gradgen.framework.backend.numpy.plan_data import PlanOptions
from gradgen.program import Program, layers, program_guard


def test_a_kernel_returning_the_wrong_dtype_is_named():
    options = PlanOptions(kernels={**KERNELS, "exp": lambda op: lambda x: np.exp(x).astype(np.float32)})
    main = Program()
    with program_guard(main, Program()):
        y = layers.exp(layers.data("x", [-1, 2], "float64"))
    feed = {"x": np.zeros((3, 2))}
    (value,) = Executor(check_types=False, options=options).run(main, feed=feed, fetch_list=[y],
                                                                   scope=Scope())  # unchecked: passes
    assert value.dtype == np.float32
    with pytest.raises(ExecutionError, match=r"op #0 \(exp\).*returned float32\[3, 2\] for output exp_0, declared "
                                             r"float64\[-1, 2\]"):
        Executor(check_types=True, options=options).run(main, feed=feed, fetch_list=[y], scope=Scope())
