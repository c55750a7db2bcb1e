"""Every kernel test case (``tests/framework/op_cases.py``, ``tests/onnx/extra_cases.py``) run on the xla backend
and on numpy: same dtypes, same shapes, values to float64 1e-12 / float32 1e-5, the same refusals."""
from __future__ import annotations

import pytest

from gradgen.framework import ExecutionError
from gradgen.program import OP_SCHEMAS
from tests.backends.xla_harness import assert_same, need_jax, run_both
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.extra_cases import EXTRA_CASES

CASES = ALL_CASES + EXTRA_CASES


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_xla_matches_numpy(case: Case):
    need_jax()
    from gradgen.framework.backend.xla import REFUSED

    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    want, got = run_both(main, feed, fetch)
    if case.op in REFUSED:  # refused whole, before anything runs, with the reason
        assert isinstance(got, ExecutionError) and REFUSED[case.op][:40] in str(got), got
        return
    assert_same(want, got, fetch, case.id)


PROGRAM_TESTED = {"cond", "while", "call", "custom_gradient",
                  *(f"{c}_{k}" for c in ("lstm", "gru") for k in ("grad", "jvp")),  # test_xla_recurrent.py
                  "allreduce_start", "allreduce_wait", "broadcast"}  # tests/distributed/test_mpi.py, on 2 ranks
"""Op types tested as whole programs (``test_xla_programs.py``) or in their own one-op tests instead of one-op
cases (the recurrences' grad and jvp ops: ONNX cannot export them, so they have no case)."""


def test_every_op_type_has_a_lowering_or_a_reason():
    need_jax()
    from gradgen.framework.backend.xla import LOWERINGS, REFUSED

    assert sorted(set(OP_SCHEMAS) - set(LOWERINGS) - set(REFUSED)) == []
    assert not set(LOWERINGS) & set(REFUSED)
    assert all(len(reason) > 20 for reason in REFUSED.values())


def test_every_lowered_op_type_has_a_case_or_a_program_test():
    need_jax()
    from gradgen.framework.backend.xla import REFUSED

    covered = {c.op for c in CASES} | PROGRAM_TESTED | set(REFUSED)
    assert sorted(set(OP_SCHEMAS) - covered) == []
