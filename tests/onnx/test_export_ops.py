"""Every kernel test case, and one program for each op the kernel cases miss, exported to ONNX and run in
ONNX Runtime: the outputs must equal gradgen's executor (float64 to 1e-10, float32 to 1e-5)."""
from __future__ import annotations

import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import OP_SCHEMAS
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.extra_cases import EXTRA_CASES
from tests.onnx.runtime import assert_close, require, run_ort

CASES = ALL_CASES + EXTRA_CASES


def export_and_compare(main, feed, fetch, params=None) -> None:
    require("onnx")
    from gradgen.framework import export_onnx

    scope = Scope()
    for name, value in (params or {}).items():
        scope.set(name, value)
    want = Executor().run(main, feed=feed, fetch_list=fetch, scope=scope)
    model = export_onnx(main, params=params, fetch_list=fetch, include_updates=False)
    got = run_ort(model, feed)
    assert list(got) == list(fetch), f"outputs {list(got)}, want {fetch}"
    for name, w in zip(fetch, want):
        assert_close(got[name], w, name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_ort_matches_the_executor(case: Case):
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    export_and_compare(main, feed, fetch)


PROGRAM_TESTED = {"cond", "while",  # control flow: test_export_programs.py
                  "call", "custom_gradient",  # sub-block bodies: test_export_schedules_and_collectives.py
                  "allreduce_start", "allreduce_wait", "broadcast",  # refused there, each listed in the error
                  *(f"{c}_{k}" for c in ("lstm", "gru") for k in ("grad", "jvp"))}  # refused: tests/recurrent
"""Op types a whole program exports (or is refused) in a test, instead of a one-op case."""


def test_every_op_type_has_a_case_or_a_program_test():
    covered = {c.op for c in CASES} | PROGRAM_TESTED
    assert sorted(set(OP_SCHEMAS) - covered) == []


def test_every_op_type_has_a_lowering():
    require("onnx")
    from gradgen.framework.tools.onnx.export import LOWERINGS, UNEXPORTABLE

    assert sorted(set(OP_SCHEMAS) ^ (set(LOWERINGS) | set(UNEXPORTABLE))) == []
    assert not set(LOWERINGS) & set(UNEXPORTABLE)
    assert all(len(reason) > 20 for reason in UNEXPORTABLE.values())
