"""lstm and gru: first and second order gradients (every pair of inputs) against finite differences in float64,
on several shapes (batch 1, one step, an empty batch), both directions, sequence lengths, both GRU forms, with
and without biases and initial states, and -1 dims met at run time."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradgen.framework import gradients
from gradgen.framework.errors import BackwardError
from gradgen.program import Program, layers, program_guard
from gradgen.program.layers.helper import append
from gradgen.program.ops.recurrent import OUTPUTS
from gradgen.program.variable import Variable
from tests.grad.checking import check_op_gradients, check_run_time_gradients
from tests.recurrent.cases import GRU_ACTIVATIONS, LSTM_ACTIVATIONS, activation_attrs, inputs

SHAPES = [(3, 2, 3, 2), (1, 1, 2, 3), (2, 0, 3, 2), (4, 3, 1, 1)]
"""(steps, batch, features, hidden): a general one, one step of batch 1, an empty batch, width 1."""


def flat(outs) -> Variable:
    """The outputs as one vector (an empty one as its sum, 0, so the vector's shape stays known)."""
    return layers.concat([layers.reshape(o, [math.prod(o.shape)]) if math.prod(o.shape)
                          else layers.reshape(layers.reduce_sum(o), [1]) for o in outs], axis=0)


def flat_outputs(cell: str, attrs: dict, slots: list[str]):
    """A build function: the op on vars named after ``slots``, every output flattened into one vector."""
    def build(*vs, **extra):
        return flat(append(cell, {**dict(zip(slots, vs)), **extra}, attrs, OUTPUTS[cell]))
    return build


def check(cell: str, ins: dict, attrs: dict, lens=None):
    extra = {} if lens is None else {"SeqLens": np.asarray(lens, np.int64)}
    check_op_gradients(flat_outputs(cell, attrs, list(ins)), ins, extra_feed=extra)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_first_and_second_order(cell, reverse, shape):
    check(cell, inputs(cell, *shape, seed=sum(shape)), {"is_reverse": reverse})


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_with_the_reset_gate_before_the_product(reverse):
    check("gru", inputs("gru", 3, 2, 2, 3, seed=4), {"is_reverse": reverse, "linear_before_reset": False})


ACTIVATION_SETS = [("lstm", a) for a in LSTM_ACTIVATIONS] + [("gru", a) for a in GRU_ACTIVATIONS]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("cell,acts", ACTIVATION_SETS, ids=lambda v: "+".join(v[0]) if isinstance(v, tuple) else v)
def test_other_activations(cell, acts, reverse):
    """ONNX's activations with their alphas and betas: every one of them in some cell, both directions,
    sequence lengths (the piecewise ones' kinks are off the sampled points)."""
    attrs = {"is_reverse": reverse, **activation_attrs(*acts)}
    check(cell, inputs(cell, 3, 3, 2, 2, seed=11 + len(acts[0][0])), attrs, lens=[3, 1, 2])


@pytest.mark.parametrize("bias,initial", [(False, True), (True, False), (False, False)])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_without_biases_or_initial_states(cell, bias, initial):
    check(cell, inputs(cell, 3, 2, 2, 2, seed=5, bias=bias, initial=initial), {})


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_sequence_lengths(cell, reverse):
    """Lengths 3, 0, 4, 1 of 4 steps: gradients stop at each sequence's end (a zero-length one passes its
    initial state through)."""
    check(cell, inputs(cell, 4, 4, 2, 2, seed=6), {"is_reverse": reverse}, lens=[3, 0, 4, 1])


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_run_time_dims(cell):
    ins = inputs(cell, 3, 2, 2, 2, seed=7)
    declared = {k: [-1] * v.ndim if k in ("X", "H0", "C0") else list(v.shape) for k, v in ins.items()}
    steps, batch, hidden = 3, 2, 2
    size = steps * batch * hidden + (len(OUTPUTS[cell]) - 1) * batch * hidden

    def build(*vs):
        outs = append(cell, dict(zip(ins, vs)), {"is_reverse": True}, OUTPUTS[cell])
        return layers.concat([layers.reshape(o, [-1]) for o in outs], axis=0)
    check_run_time_gradients(build, declared, ins, (size,))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_grad_op_first_order(cell):
    """The fused grad op on its own, as a function of the inputs and the output gradients."""
    ins = inputs(cell, 3, 2, 2, 2, seed=8)
    rng = np.random.default_rng(9)
    cots = {"Y@GRAD": rng.standard_normal((3, 2, 2)), "H@GRAD": rng.standard_normal((2, 2))}
    slots = [*ins, *cots]

    def build(*vs):
        return flat(append(f"{cell}_grad", dict(zip(slots, vs)), {}, [f"{p}@GRAD" for p in ins]))
    check_op_gradients(build, {**ins, **cots}, second_order=False)


def test_a_third_order_gradient_is_refused_by_name():
    ins = inputs("lstm", 2, 1, 2, 2, seed=10)
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(k, list(v.shape), "float64") for k, v in ins.items()]
        y, _, _ = append("lstm", dict(zip(ins, vs)), {}, OUTPUTS["lstm"])
        g1 = gradients(layers.reduce_sum(y * y), vs)
        g2 = gradients(layers.reduce_sum(g1[0] * g1[0]), vs)
        with pytest.raises(BackwardError, match="third derivatives of the lstm recurrence"):
            gradients(layers.reduce_sum(g2[1] * g2[1]), vs)


@pytest.mark.parametrize("engine", ["numpy", "xla", "torch"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_grad_op_naming_some_of_its_outputs_gives_those(cell, engine):
    """A ``<cell>_grad`` with outputs for only some of its given inputs (a pass may drop unread ones) gives those
    gradients, each the full op's, on every engine (not the first ones of the full list). W and R are alike in
    shape here, so R's given as W's would not be caught by its shape."""
    from gradgen.framework import Executor, Scope
    from tests.backends.test_torch_backend import need_torch
    from tests.backends.xla_harness import need_jax

    {"xla": need_jax, "torch": need_torch}.get(engine, lambda: None)()
    ins = {k: v.astype(np.float32) for k, v in inputs(cell, 3, 2, 2, 2, seed=11).items()}
    main = Program()
    with program_guard(main, Program()):
        vs = {s: layers.data(s, list(a.shape), "float32") for s, a in ins.items()}
        dy = layers.data("dy", [3, 2, 2], "float32")
        for outs in (("R",), ("X", "R"), tuple(ins)):
            append(f"{cell}_grad", {**vs, "Y@GRAD": dy}, {}, [f"{p}@GRAD" for p in outs])
    ops = main.global_block().ops
    fetch = [n for op in ops for n in op.output_arg_names]
    feed = {**ins, "dy": np.random.default_rng(12).standard_normal((3, 2, 2)).astype(np.float32)}
    got = dict(zip(fetch, Executor(backend=engine).run(main, feed=feed, fetch_list=fetch, scope=Scope())))
    full = {slot: got[names[0]] for slot, names in ops[2].outputs.items() if names}
    for op in ops[:2]:
        for slot, names in op.outputs.items():
            if names:
                np.testing.assert_array_equal(got[names[0]], full[slot], err_msg=f"{engine} {slot}")
