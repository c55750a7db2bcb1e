"""Forward mode through the recurrent grad and jvp ops (the orders that need no third derivative), their
refused third order, and the ONNX export refusing them by name."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import gradients
from gradgen.framework.errors import ForwardError
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from gradgen.program.ops.recurrent import OUTPUTS
from tests.forward.helpers import dot_product_sides, one_op
from tests.forward.test_finite_differences import test_tangent_matches_finite_differences as check_tangent
from tests.framework.op_harness import Case, one_op_program
from tests.recurrent.cases import inputs

rng = np.random.default_rng(21)


def _cotangents(cell: str, steps: int, batch: int, hidden: int, slots=None) -> dict:
    shapes = {"Y": (steps, batch, hidden), "H": (batch, hidden), "C": (batch, hidden)}
    return {f"{o}@GRAD": rng.standard_normal(shapes[o]) for o in (slots or OUTPUTS[cell])}


def grad_cases():
    for cell in ("lstm", "gru"):
        for reverse, lens in [(False, None), (True, [2, 1])]:
            extra = {"SeqLens": np.array(lens, np.int64)} if lens else {}
            params = inputs(cell, 3, 2, 2, 2, seed=1)
            yield Case(f"{cell}_grad", {**params, **extra, **_cotangents(cell, 3, 2, 2)}, None,
                       {"is_reverse": reverse}, _grad_outputs(params), label=f"reverse={reverse},lens={lens}")
        params = inputs(cell, 2, 1, 3, 2, seed=2, bias=False, initial=False)
        yield Case(f"{cell}_grad", {**params, **_cotangents(cell, 2, 1, 2, ["Y"])}, None, {},
                   _grad_outputs(params), label="minimal")


def _grad_outputs(params: dict) -> dict:
    return {f"{p}@GRAD": 1 for p in params}


@pytest.mark.parametrize("case", list(grad_cases()), ids=lambda c: c.id)
def test_grad_op_tangent_matches_finite_differences(case):
    check_tangent(case)


@pytest.mark.parametrize("case", list(grad_cases()), ids=lambda c: c.id)
def test_grad_op_forward_and_reverse_agree(case):
    main, outs, ins, feed = one_op(case)
    lhs, rhs = dot_product_sides(main, outs, ins, feed, np.random.default_rng(5))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("with_cotangents", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_jvp_op_is_linear_in_its_tangents_both_ways(cell, with_cotangents):
    """<J v, u> = <v, J^T u> for the jvp op in its tangent inputs (and the output gradients when they are the
    only other thing moving): the orders of it that need no third derivative."""
    params = inputs(cell, 3, 2, 2, 2, seed=3)
    tangents = {f"{p}@DOT": rng.standard_normal(v.shape) for p, v in params.items()}
    grads = _cotangents(cell, 3, 2, 2)
    moving = {f"{k}@DOT": v for k, v in grads.items()} if not with_cotangents else grads
    fixed = {**params, **({} if with_cotangents else tangents)}
    case = Case(f"{cell}_jvp", {**fixed, **moving}, None, {},
                {**{f"{o}@DOT": 1 for o in OUTPUTS[cell]}, **{f"{p}@GRAD@DOT": 1 for p in params}})
    main, op, feed = one_op_program(case)
    block = main.global_block()
    outs = [block.var(n) for n in op.output_arg_names]
    ins = [block.var(op.input(slot)[0]) for slot in moving]
    lhs, rhs = dot_product_sides(main, outs, ins, feed, np.random.default_rng(6))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


def test_forward_mode_of_a_jvp_in_its_weights_is_refused_by_name():
    from gradgen.framework import forward_gradients
    ins = inputs("gru", 2, 1, 2, 2, seed=4)
    main = Program()
    with program_guard(main, Program()):
        vs = {k: layers.data(k, list(v.shape), "float64") for k, v in ins.items()}
        t = layers.data("t", list(ins["X"].shape), "float64")
        y = append("gru_jvp", {**vs, "X@DOT": t}, {}, ["Y@DOT", "H@DOT"])[0]
        v = layers.data("v", list(ins["W"].shape), "float64")
        with pytest.raises(ForwardError, match="third derivatives of the gru recurrence"):
            forward_gradients([y], [vs["W"]], [v])


def test_export_refuses_the_gradient_ops_by_name():
    pytest.importorskip("onnx")
    from gradgen.framework import export_onnx
    from gradgen.framework.tools.onnx.errors import OnnxExportError
    ins = inputs("lstm", 2, 1, 2, 2, seed=5)
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(k, list(v.shape), "float64") for k, v in ins.items()]
        y = append("lstm", dict(zip(ins, vs)), {}, OUTPUTS["lstm"])[0]
        (gx,) = gradients(layers.reduce_sum(y), [vs[0]])
    with pytest.raises(OnnxExportError, match="lstm_grad"):
        export_onnx(main, fetch_list=[gx.name])
