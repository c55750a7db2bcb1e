"""The registry invariant: every op, on every dtype its schema accepts, computes the types it declares.

For each op type, each input slot (or dtype attr) with its own list of
accepted dtypes, and each dtype in that list, hypothesis draws cases from
``registry_cases.CASES`` (ranks 0 to 4, size-1 and zero-size dims, declared
-1 dims) and runs them with type checking on: every output of every op,
sub-blocks included, must have exactly its declared dtype and a shape that
matches its declaration. A new op type fails ``test_every_op_type_has_a_case``
until it has a case builder, and a new accepted dtype is run at once.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradgen.framework import Executor, Scope
from gradgen.framework.backend.shared.conformance import shape_matches
from gradgen.program import OP_SCHEMAS

from .registry_cases import CASES, Draw

PARAMS = [(op_type, key, dtype) for op_type, schema in OP_SCHEMAS.items() for key, rule in schema.dtypes.items()
          if not isinstance(rule, str) for dtype in rule]


def test_every_op_type_has_a_case():
    assert sorted(OP_SCHEMAS) == sorted(CASES)


@pytest.mark.parametrize("op_type, key, dtype", PARAMS, ids=["-".join(p) for p in PARAMS])
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_op_computes_the_types_it_declares(op_type, key, dtype, data):
    built = CASES[op_type](Draw(data, op_type, {key: dtype}))
    op, block = built.op, built.program.global_block()
    assert op.type == op_type
    for slot, names in op.inputs.items():  # the case gave what the schema accepts, including the fixed dtype
        rule = OP_SCHEMAS[op_type].dtypes[slot]
        for name in names:
            var = block.var(name)
            assert var.dtype in (rule if not isinstance(rule, str) else (block.var(op.input(rule)[0]).dtype,))
    fixed = op.attrs.get(key) if key in op.attrs else [block.var(n).dtype for n in op.input(key)]
    assert fixed == dtype or dtype in fixed
    fetch = [n for names in op.outputs.values() for n in names]
    with np.errstate(all="ignore"):
        values = Executor(check_types=True).run(built.program, feed=built.feed, fetch_list=fetch, scope=Scope())
    for name, value in zip(fetch, values):
        var = block.var(name)
        assert value.dtype == np.dtype(var.dtype), (name, value.dtype, var.type_str())
        assert shape_matches(var.shape, value.shape), (name, value.shape, var.type_str())
