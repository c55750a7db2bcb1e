"""Issue 23's ops through gradgen -> ONNX -> gradgen: each comes back as itself (argsort as a sort whose indices are
read: both are a TopK over the whole axis, whose length is static or read at run time) and computes what the
original computes."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import assert_close, require


@pytest.mark.parametrize("batch", [-1, 3])
def test_the_new_ops_survive_a_round_trip(batch):
    require("onnx")
    from gradgen.framework import export_onnx, import_onnx

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [batch, 4, 4], "float64")
        y = layers.data("y", [4, 2], "float64")
        outs = [layers.tril(x, -1), layers.triu(x, 2), layers.flatten(x, 2),
                layers.einsum("...ij,jk->...ik", x, y), layers.einsum("bij,bij", x, x),
                layers.sort(x, 0, descending=True), layers.argsort(x, -1), layers.sort(x, 1)]
    feed = {"x": np.round(np.random.default_rng(0).standard_normal((3, 4, 4)), 1), "y": np.ones((4, 2)) * 0.5}
    want = Executor().run(main, feed=feed, fetch_list=outs)
    program, params, outputs = import_onnx(export_onnx(main, fetch_list=outs))
    types = [op.type for op in program.global_block().ops]
    for op_type, count in {"tril": 1, "triu": 1, "flatten": 1, "einsum": 2, "sort": 3}.items():
        assert types.count(op_type) == count, (op_type, types)
    got = Executor().run(program, feed=feed, fetch_list=[outputs[o.name] for o in outs])
    for o, g, w in zip(outs, got, want):
        assert_close(g, w, o.name)
