"""Run one op through the executor on given arrays: the helper every kernel test uses."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gradgen.framework import Executor, Scope
from gradgen.program import OP_SCHEMAS, Program


@dataclass
class Case:
    """One op on concrete inputs, and the numpy computation it must agree with.

    ``inputs`` maps slot -> array (or a list of arrays for a duplicable slot).
    ``expect`` takes the same mapping and returns slot -> array(s), or one
    array when the op's only output slot is ``Out``. ``n_outputs`` gives the
    var count of duplicable output slots.
    """

    op: str
    inputs: dict[str, Any]
    expect: Callable[[dict], Any] | None
    attrs: dict = field(default_factory=dict)
    n_outputs: dict = field(default_factory=dict)
    label: str = ""

    @property
    def id(self) -> str:
        shapes = ",".join(
            "x".join(map(str, np.shape(v))) if not isinstance(v, list) else f"{len(v)}*" + "x".join(map(str, np.shape(v[0])))
            for v in self.inputs.values())
        dtypes = {str(np.asarray(v if not isinstance(v, list) else v[0]).dtype) for v in self.inputs.values()}
        return f"{self.op}[{shapes}|{'/'.join(sorted(dtypes))}{'|' + self.label if self.label else ''}]"


def one_op_program(case: Case):
    """The case's op alone in block 0 of a new program; returns (program, op, feed by var name)."""
    main = Program()
    block = main.global_block()
    feed, ins = {}, {}
    for slot, value in case.inputs.items():
        values = value if isinstance(value, list) else [value]
        names = []
        for k, v in enumerate(values):
            v = np.asarray(v)
            name = f"in_{slot}_{k}"
            block.create_var(name, v.shape, v.dtype.name)
            feed[name] = v
            names.append(name)
        ins[slot] = names
    schema = OP_SCHEMAS[case.op]
    outs = {s.name: [f"out_{s.name}_{k}" for k in range(case.n_outputs.get(s.name, 1))]
            for s in schema.outputs if not s.optional or s.name in case.n_outputs}
    op = block.append_op(case.op, ins, outs, case.attrs)
    return main, op, feed


def run_case(case: Case):
    """Build a one-op program, run it, check the type promise; returns ({slot: [arrays]}, {slot: [Variables]})."""
    main, op, feed = one_op_program(case)
    block, outs = main.global_block(), op.outputs
    fetch = [n for names in outs.values() for n in names]
    before = {k: v.copy() for k, v in feed.items()}
    values = Executor().run(main, feed=feed, fetch_list=fetch, scope=Scope())
    for name, v in before.items():
        np.testing.assert_array_equal(feed[name], v, err_msg=f"{case.op} modified its input {name}")
    got, declared, it = {}, {}, iter(values)
    for slot, names in outs.items():
        got[slot] = [next(it) for _ in names]
        declared[slot] = [block.var(n) for n in names]
    return got, declared


def check_type_promise(got, declared, op: str) -> None:
    """Every output has exactly the dtype and shape compile-time inference declared."""
    for slot, arrays in got.items():
        for a, var in zip(arrays, declared[slot]):
            assert isinstance(a, np.ndarray), f"{op}: {slot} is a {type(a).__name__}, not an ndarray"
            assert a.dtype == np.dtype(var.dtype), f"{op}: {slot} has dtype {a.dtype}, declared {var.type_str()}"
            assert a.shape == var.shape, f"{op}: {slot} has shape {a.shape}, declared {var.type_str()}"
