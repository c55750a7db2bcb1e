"""Control flow nested 200 deep builds, prints, loads, differentiates and runs; past the limit, one clear error."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients
# verify from the package: importing the submodule gradgen.program.verify would shadow the package's function
from gradgen.program import Program, layers, program_guard, verify
from gradgen.program.errors import ProgramError, SerializationError
from gradgen.program.nesting import MAX_NESTING


def _nested(depth: int):
    """``cond(p, cond(p, ... x * 2 ..., x), x)`` nested ``depth`` deep; built with a loop, not recursion."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        p = layers.data("p", [1], "bool")
        inner = lambda: x * 2.0  # noqa: E731
        for _ in range(depth):
            inner = (lambda f: lambda: layers.cond(p, f, lambda: x))(inner)
        loss = layers.reduce_sum(inner())
    return main, x, loss


def test_control_flow_nested_200_deep_works_end_to_end():
    main, x, loss = _nested(200)
    verify(main)
    (grad,) = gradients(loss, [x])
    exe, xs = Executor(), np.array([0.5, -1.0])
    for taken, slope in ((True, 2.0), (False, 1.0)):
        value, g = exe.run(main, feed={"x": xs, "p": np.array([taken])}, fetch_list=[loss, grad], scope=Scope())
        assert value == pytest.approx(slope * xs.sum())
        np.testing.assert_array_equal(g, [slope, slope])
    assert "cond" in str(main)
    loaded = Program.from_json(main.to_json())
    assert loaded.to_json() == main.to_json()


def test_nesting_past_the_limit_is_one_clear_error_when_building():
    with pytest.raises(ProgramError, match=f"nested {MAX_NESTING + 1} levels deep; gradgen supports up to"):
        _nested(MAX_NESTING + 1)


def test_nesting_past_the_limit_is_one_clear_error_when_loading():
    data = json.loads(Program().to_json())
    empty = data["blocks"][0]
    data["blocks"] = [dict(empty, idx=i, parent_idx=i - 1) for i in range(MAX_NESTING + 2)]
    with pytest.raises(SerializationError, match=rf"blocks\[{MAX_NESTING + 1}\] is nested {MAX_NESTING + 1} levels"):
        Program.from_json(json.dumps(data))
