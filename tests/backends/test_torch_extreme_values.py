"""Every op type of one or two float inputs (and no required attrs) on the torch engine, against the numpy
reference, with one value near an end of the float range among 63 ordinary ones: their sum stays finite, so the
engine's finiteness checks let ATen's fast paths run, and the tensor is long enough for ATen's vector kernels
(which round otherwise than its scalar ones); NaN, the infinities and -0 too. Such a sweep found ATen's float32
gelu, torch's remainder, ATen's running products and its batch norm gradient parting from the reference there
(``design_docs/numerics.md``)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.program.ops import OP_SCHEMAS
from gradgen.program.schema import REQUIRED
from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program

REORDERED = {"reduce_prod", "prod_others"}
"""Products whose order of multiplication decides whether a value near the largest float overflows: the engines
may reorder them (``numerics.md``, *What is not held yet*)."""


def _swept_types() -> list[str]:
    found = []
    for op_type, schema in sorted(OP_SCHEMAS.items()):
        required = [slot for slot in schema.inputs if not slot.optional]
        if (1 <= len(required) <= 2 and not any(slot.duplicable for slot in schema.inputs)
                and not any(attr.default is REQUIRED for attr in schema.attrs.values()) and op_type not in REORDERED):
            found.append(op_type)
    return found


def _extremes(dtype: str) -> list[float]:
    most = float(np.finfo(dtype).max)
    return [most, -most, most / 2, -most / 2, 1e19, float(np.finfo(dtype).tiny), -700.0, 88.0,
            float("nan"), float("inf"), float("-inf"), -0.0]


@pytest.mark.parametrize("op_type", _swept_types())
def test_an_extreme_value_among_ordinary_ones_gives_the_references_numbers(op_type):
    need_torch()
    from gradgen.framework.backend.torch import KERNELS

    if op_type not in KERNELS:
        return  # refused whole by the engine, named (tests/backends/test_torch_backend.py)
    slots = [slot.name for slot in OP_SCHEMAS[op_type].inputs if not slot.optional]
    rng = np.random.default_rng(sum(map(ord, op_type)))
    compared = 0
    for dtype in ("float32", "float64"):
        for extreme in _extremes(dtype):
            spoiled = rng.standard_normal((4, 16)).astype(dtype)
            spoiled[1, 3] = extreme
            plain = rng.standard_normal((4, 16)).astype(dtype)
            for arrays in ([spoiled],) if len(slots) == 1 else ([spoiled, plain], [plain, spoiled]):
                try:
                    main, op, feed = one_op_program(Case(op_type, dict(zip(slots, arrays)), None, {}))
                except Exception:  # the op takes other shapes or dtypes (an index, a label): not this sweep's
                    return
                fetch = [n for names in op.outputs.values() for n in names]
                want = run_on("numpy", main, feed, fetch)
                if isinstance(want, Exception):
                    continue
                assert_same(want, run_on("torch", main, feed, fetch), fetch, f"{op_type} {dtype} {extreme}")
                compared += 1
    assert compared or op_type in ("increment",), op_type
