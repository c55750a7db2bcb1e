"""The steps past a sequence's end take no part, whatever they would compute: an infinite initial state or weight
gives a sequence non-finite states inside it, and yet its outputs past its end are exactly 0, its final state the
one its last step left, and the gradients of its padding (X there, the outputs' gradients there) exactly 0 and
without effect, on the reference and on every engine (ONNX's rule, PyTorch's packed sequences). Until 2026-12-02
the state blend m s' + (1 - m) s made them NaN."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot
from tests.backends.test_torch_backend import run_on
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program
from tests.recurrent.cases import inputs

LENGTHS = np.array([4, 1, 0], np.int64)
"""Sequence 0 full, sequence 1 one step long, sequence 2 empty (its state the initial one)."""


def _arrays(cell: str, spoil: str, reverse: bool):
    ins = inputs(cell, 4, 3, 3, 2, seed=7)
    ins["SeqLens"] = LENGTHS
    if spoil == "H0":
        ins["H0"][1, 0] = np.inf  # sequence 1's state is not finite from its first step on
    else:
        ins["RB"][1] = np.inf  # every sequence's states are not finite once a step runs
    rng = np.random.default_rng(8)
    cots = {grad_slot("Y"): rng.standard_normal((4, 3, 2)), **{grad_slot(s): rng.standard_normal((3, 2))
                                                             for s in OUTPUTS[cell][1:]}}
    cots[grad_slot("Y")][1:, 1] = np.nan  # the padding's output gradients: read by nothing
    cots[grad_slot("Y")][:, 2] = np.inf
    return ins, cots, {"is_reverse": reverse}


def _run(engine: str, case: Case):
    main, op, feed = one_op_program(case)
    return run_on(engine, main, feed, op.output_arg_names), op


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("spoil", ["H0", "RB"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_padding_takes_no_part_on_the_reference(cell, spoil, reverse):
    ins, cots, attrs = _arrays(cell, spoil, reverse)
    (y, *finals), _ = _run("numpy", Case(cell, ins, None, attrs))
    assert (y[1:, 1] == 0).all() and (y[:, 2] == 0).all()  # past each end: exactly 0, not 0 * inf
    initial = [ins["H0"], ins["C0"]] if cell == "lstm" else [ins["H0"]]
    for final, start in zip(finals, initial):
        np.testing.assert_array_equal(final[2], start[2])  # the empty sequence keeps its initial state
    params = [p for p in PARAMS[cell] if p in ins]
    grads, op = _run("numpy", Case(f"{cell}_grad", {**ins, **cots}, None, attrs, {grad_slot(p): 1 for p in params}))
    dx = grads[params.index("X")]
    assert (dx[1:, 1] == 0).all() and (dx[:, 2] == 0).all()  # X past each end is not read
    if spoil == "H0":  # sequence 0 never meets the infinity, nor the padding's NaN and inf gradients
        assert np.isfinite(dx[:, 0]).all()


@pytest.mark.parametrize("engine", ["xla", "torch"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("spoil", ["H0", "RB"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_every_engine_gives_the_references_padding(cell, spoil, reverse, engine):
    from tests.backends.test_torch_backend import need_torch
    from tests.backends.xla_harness import need_jax

    (need_jax if engine == "xla" else need_torch)()
    ins, cots, attrs = _arrays(cell, spoil, reverse)
    params = [p for p in PARAMS[cell] if p in ins]
    for case in (Case(cell, ins, None, attrs),
                 Case(f"{cell}_grad", {**ins, **cots}, None, attrs, {grad_slot(p): 1 for p in params})):
        (want, op), (got, _) = _run("numpy", case), _run(engine, case)
        assert_same(want, got, op.output_arg_names, f"{engine} {case.op}")
