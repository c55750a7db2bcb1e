"""Forward mode agrees with reverse mode on every op: <J v, u> = <v, J^T u> in float64, to 1e-10 relative."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.grad_makers.tangents import TANGENT_RULES

from .cases import float64_cases
from .helpers import dot_product_sides, one_op

CASES = float64_cases()


def test_every_op_with_a_tangent_rule_has_a_case():
    # sub-block ops: cond and while in test_control_flow.py, call and custom_gradient in tests/custom
    # the recurrent ops' grad and jvp ops in tests/recurrent/test_forward.py (their third order is refused)
    covered = {c.op for c in CASES} | {"cond", "while", "call", "custom_gradient"} | {
        f"{c}_{k}" for c in ("lstm", "gru") for k in ("grad", "jvp")}
    assert set(TANGENT_RULES) <= covered, sorted(set(TANGENT_RULES) - covered)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_forward_and_reverse_agree(case):
    main, outs, ins, feed = one_op(case)
    lhs, rhs = dot_product_sides(main, outs, ins, feed, np.random.default_rng(5))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


BROADCAST = [c for c in CASES if c.op.startswith("elementwise_")
             or c.op in ("matmul", "where", "scatter", "scatter_add", "conv2d_transpose")]


@pytest.mark.parametrize("moving", [0, 1])
@pytest.mark.parametrize("case", BROADCAST, ids=lambda c: c.id)
def test_one_moving_operand_gets_a_tangent_at_the_outputs_shape(case, moving):
    """Only one operand moves (the other is constant): its tangent is broadcast to the output where it was
    (scatter: the other's tangent is zeros where it would go)."""
    main, outs, ins, feed = one_op(case)
    assert len(ins) == 2
    lhs, rhs = dot_product_sides(main, outs, [ins[moving]], feed, np.random.default_rng(8))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)
