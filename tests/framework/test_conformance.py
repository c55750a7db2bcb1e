"""The runtime's one answer to "does this value have its var's declared type?"."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError
from gradgen.framework.backend.shared.conformance import as_declared, conforms, declared, shape_matches
from gradgen.program import Program


def _var(shape, dtype="float64"):
    block = Program().global_block()
    return block, block.create_var("v", shape, dtype)


@pytest.mark.parametrize("shape,value,ok", [
    ([-1, 3], np.zeros((5, 3)), True), ([-1, 3], np.zeros((0, 3)), True), ([-1, -1], np.zeros((1, 1)), True),
    ([2, 3], np.zeros((2, 3)), True), ([], np.zeros(()), True),
    ([-1, 3], np.zeros((5, 4)), False), ([-1, 3], np.zeros(3), False), ([], np.zeros(1), False),
    ([2, 3], np.zeros((2, 3), np.float32), False), ([2, 3], np.zeros((2, 3), np.int64), False),
    ([], np.float64(1.0), False), ([2], [1.0, 2.0], False)])
def test_conforms_only_for_an_ndarray_of_the_declared_dtype_and_shape(shape, value, ok):
    _, var = _var(shape)
    assert conforms(value, declared(var)) is ok


@pytest.mark.parametrize("declared_shape,actual,ok", [
    ([-1, 3], (5, 3), True), ([-1, 3], (0, 3), True), ([], (), True), ([2, -1], (2, 1), True),
    ([-1, 3], (5, 4), False), ([-1, 3], (3,), False), ([], (1,), False), ([2], (2, 1), False)])
def test_shape_matches_lets_minus_one_match_any_size_and_nothing_else(declared_shape, actual, ok):
    assert shape_matches(declared_shape, actual) is ok


def test_as_declared_converts_python_values_and_explains_the_rest():
    block, _ = _var([-1, 2], "float32")
    got = as_declared(block, "v", [[1, 2], [3, 4]], "feed", ExecutionError)
    assert got.dtype == np.float32 and got.shape == (2, 2)
    with pytest.raises(ExecutionError, match=r"feed 'v' has dtype float64, but v: float32\[-1, 2\] is declared"):
        as_declared(block, "v", np.zeros((2, 2)), "feed", ExecutionError)
    with pytest.raises(ExecutionError, match=r"scope value 'v' has shape \[2, 3\]"):
        as_declared(block, "v", np.zeros((2, 3), np.float32), "scope value", ExecutionError)
    with pytest.raises(ExecutionError, match="cannot be turned into a float32 array"):
        as_declared(block, "v", "text", "feed", ExecutionError)
