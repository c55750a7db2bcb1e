"""``gradgen.framework.function``'s errors: each a ``FunctionError`` that names the argument or value at fault."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import FunctionError, function, optimizer
from gradgen.program import GradgenError, layers

XS = np.random.default_rng(7).standard_normal((8, 4))


def test_a_returned_python_value_is_named_with_its_position():
    step = function(lambda x: (layers.tanh(x), 3))
    with pytest.raises(FunctionError, match=r"returned int 3 at \[1\]; it must return a Variable"):
        step(XS)
    assert not step.programs


def test_returning_nothing_is_an_error():
    def forgot_return(x):
        layers.tanh(x)

    with pytest.raises(FunctionError, match="forgot_return returned NoneType None at the top"):
        function(forgot_return)(XS)


def test_an_optimizer_needs_a_scalar_first_output():
    def per_row(x):
        return layers.reduce_sum(layers.fc(x, 2), dim=[1])

    with pytest.raises(FunctionError, match=r"per_row: with optimizer= the first value .* a float scalar; "
                                            r"'reduce_sum_0' is float64\[-1\]"):
        function(per_row, optimizer=optimizer.SGD(0.1))(XS)


def test_a_changed_dtype_with_parameters_names_the_argument():
    step = function(lambda x: layers.fc(x, 3))
    step(XS)
    with pytest.raises(FunctionError, match=r"'fc_0.w_0' in its scope is float64\[4, 3\], made by the call "
                                            r"\(x: float64\[-1, 4\]\), but this call \(x: float64\[-1, 4\] -> "
                                            r"float32\[-1, 4\]\) declares it float32\[4, 3\]"):
        step(XS.astype("float32"))
    assert len(step.programs) == 1 and step.scope["fc_0.w_0"].dtype == np.float64


def test_a_static_argument_that_reshapes_a_parameter_is_named():
    step = function(lambda x, width: layers.fc(x, width))
    step(XS, 3)
    with pytest.raises(FunctionError, match=r"this call \(width: 3 -> 5\) declares it float64\[4, 5\]"):
        step(XS, 5)


def test_an_unhashable_argument_is_named():
    step = function(lambda x, sizes: layers.tanh(x))
    with pytest.raises(FunctionError, match="argument 'sizes' is a list, neither an array .* nor a hashable"):
        step(XS, [1, 2])


def test_an_array_of_a_dtype_programs_do_not_take_is_named():
    with pytest.raises(FunctionError, match="argument 'pixels' is a uint8 array; a program takes"):
        function(lambda pixels: layers.cast(pixels, "float32"))(np.zeros((2, 3), np.uint8))


def test_arguments_that_do_not_bind_are_a_function_error():
    with pytest.raises(FunctionError, match="missing a required argument: 'y'"):
        function(lambda x, y: x + y)(XS)


def test_the_program_before_the_first_call_is_an_error():
    step = function(lambda x: layers.tanh(x))
    assert step.signature is None and step.programs == {}
    with pytest.raises(FunctionError, match="has built no program yet: it builds one on its first call"):
        step.program


def test_wrapping_a_non_callable_is_an_error():
    with pytest.raises(FunctionError, match="wraps a Python function, got int 3"):
        function(3)


def test_function_errors_are_gradgen_errors():
    assert issubclass(FunctionError, GradgenError)
