"""``gradgen.framework.fluid``: Paddle's names resolve to gradgen's objects; the few Paddle 1.x differences."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, fluid, inference, optimizer, scope_guard
from gradgen.program import Program, layers, program_guard


def test_names_are_gradgens_own_objects():
    assert fluid.Executor is Executor and fluid.optimizer.AdamW is optimizer.AdamW and fluid.core.Scope is Scope
    assert fluid.layers.fc is layers.fc and fluid.data is layers.data
    assert fluid.io.save_inference_model is inference.save_inference_model
    assert fluid.core.is_compiled_with_cuda() is False


@pytest.mark.parametrize("shape,append,expected", [
    ([13], True, (-1, 13)), ([None, 13], True, (-1, 13)), ([-1, 3], True, (-1, 3)), ([13], False, (13,)),
])
def test_paddle_1_data_prepends_a_batch_dim(shape, append, expected):
    with program_guard(Program(), Program()):
        assert fluid.layers.data("x", shape, append_batch_size=append).shape == expected


def test_mean_is_shaped_1_and_trains():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float64")
        avg = fluid.layers.mean(fluid.layers.square(fluid.layers.fc(input=x, size=1)))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(avg)
    assert avg.shape == (1,)
    exe = fluid.Executor()
    with scope_guard(Scope()):
        exe.run(startup)
        values = [exe.run(main, feed={"x": np.ones((4, 2))}, fetch_list=[avg])[0] for _ in range(3)]
    assert values[0].shape == (1,) and values[2][0] < values[0][0]


def test_save_and_load_persistables_use_the_global_scope(tmp_path):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        fluid.layers.fc(input=fluid.data("x", [None, 2], "float32"), size=3)
    exe = fluid.Executor()
    with scope_guard(Scope()) as first:
        exe.run(startup)
        assert fluid.io.save_persistables(exe, str(tmp_path), main) == ["fc_0.w_0", "fc_0.b_0"]
    with scope_guard(Scope()) as second:
        fluid.io.load_persistables(exe, str(tmp_path), main)
    np.testing.assert_array_equal(second["fc_0.w_0"], first["fc_0.w_0"])
