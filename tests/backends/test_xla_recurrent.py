"""The fused recurrences on the xla backend beside numpy: ``lstm_grad``/``gru_grad`` and ``lstm_jvp``/``gru_jvp``
as one-op programs (ONNX's other activations,
both directions, sequence lengths, both GRU forms, absent biases, initial states and
cotangents, zero steps, an empty batch; float64 to 1e-12, float32 to 1e-5; NaN, the infinities, 3e38 and -0 in
any input, the reference's non-finite values exactly), a length out of range failing the
run as numpy's kernel raises, and ``layers.lstm``/``layers.gru`` trained alike for 5 steps. The forward ops are
``op_cases.recurrent_cases`` (``test_xla_ops``)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot
from tests.backends.xla_harness import assert_same, need_jax, run_both
from tests.framework.op_harness import Case, one_op_program
from tests.recurrent.cases import GRU_ACTIVATIONS, LSTM_ACTIVATIONS, activation_attrs, inputs

SHAPES = [(4, 3, 3, 2), (1, 1, 2, 3), (0, 2, 3, 2), (3, 0, 2, 2)]
"""(steps, batch, features, hidden): a general one, one step of batch 1, zero steps, an empty batch."""

CONFIGS = [  # is_reverse, lengths (for 3 sequences, else none), biases and initial states given, GRU form
    (False, None, True, True), (True, None, False, False), (False, [3, 0, 4], True, False),
    (True, [1, 4, 2], False, True), (True, [4, 2, 3], True, True),
]


SHAPE_CONFIGS = [(shape, config) for shape in SHAPES for config in (CONFIGS if all(shape) else CONFIGS[:2])]
"""Every configuration on the shapes with steps and rows; on zero steps or an empty batch (nothing to reverse or to
cut to a length) the first two, both directions, with and without biases and initial states: each case is an XLA
compile (0.45 s), and the other three added 22 s to the suite."""


def _feed(cell: str, shape, config, dtype: str, seed: int) -> tuple[dict, dict]:
    reverse, lens, full, lbr = config
    ins = inputs(cell, *shape, seed=seed, dtype=dtype, bias=full, initial=full)
    if lens is not None and shape[:2] == (4, 3):
        ins["SeqLens"] = np.asarray(lens, np.int32)
    attrs = {"is_reverse": reverse, **({"linear_before_reset": lbr} if cell == "gru" else {})}
    return ins, attrs


def _outputs_like(cell: str, ins: dict, rng, dtype: str, drop: str | None) -> dict:
    """A random cotangent for each output of the cell (but ``drop``)."""
    steps, batch, hidden = ins["X"].shape[0], ins["X"].shape[1], ins["R"].shape[1]
    shapes = {"Y": (steps, batch, hidden), "H": (batch, hidden), "C": (batch, hidden)}
    return {o: rng.standard_normal(shapes[o]).astype(dtype) for o in OUTPUTS[cell] if o != drop}


def _compare(case: Case, overflow_order: bool = False) -> None:
    need_jax()
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    want, got = run_both(main, feed, fetch)
    assert not isinstance(want, Exception), want
    (_same_up_to_the_order_of_an_overflowing_sum if overflow_order else assert_same)(want, got, fetch, case.id)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,config", SHAPE_CONFIGS, ids=str)
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_gradient_op_matches_numpy(cell, shape, config, dtype):
    seed = sum(shape) + CONFIGS.index(config)
    ins, attrs = _feed(cell, shape, config, dtype, seed)
    rng = np.random.default_rng(seed)
    drop = "Y" if config[0] else OUTPUTS[cell][-1]  # one cotangent absent (zero) in each case
    cots = {grad_slot(o): v for o, v in _outputs_like(cell, ins, rng, dtype, drop).items()}
    grads = {grad_slot(p): 1 for p in PARAMS[cell] if p in ins}
    _compare(Case(f"{cell}_grad", {**ins, **cots}, None, attrs, grads))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,config", SHAPE_CONFIGS, ids=str)
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_tangent_op_matches_numpy(cell, shape, config, dtype):
    seed = 7 * sum(shape) + CONFIGS.index(config)
    ins, attrs = _feed(cell, shape, config, dtype, seed)
    rng = np.random.default_rng(seed)
    params = [p for p in PARAMS[cell] if p in ins]
    dots = {tangent_slot(p): rng.standard_normal(ins[p].shape).astype(dtype) for p in params[1:]}  # X@DOT absent
    cots = {grad_slot(o): v for o, v in _outputs_like(cell, ins, rng, dtype, "Y" if config[0] else None).items()}
    cot_dots = {tangent_slot(grad_slot(o)): v
                for o, v in _outputs_like(cell, ins, rng, dtype, None if config[0] else "Y").items()}
    outs = {**{tangent_slot(o): 1 for o in OUTPUTS[cell][config[2]:]},  # Y@DOT not asked for when full
            **{tangent_slot(grad_slot(p)): 1 for p in params}}
    _compare(Case(f"{cell}_jvp", {**ins, **dots, **cots, **cot_dots}, None, attrs, outs))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("cell,acts", [("lstm", a) for a in LSTM_ACTIVATIONS] + [("gru", a) for a in GRU_ACTIVATIONS],
                         ids=lambda v: "+".join(v[0]) if isinstance(v, tuple) else v)
def test_other_activations_match_numpy(cell, acts, dtype):
    """The gradient and tangent ops with ONNX's other activations (the forward is in ``op_cases``)."""
    seed = len(acts[0][0]) + len(acts[0])
    ins, attrs = _feed(cell, (4, 3, 3, 2), (bool(seed % 2), [3, 0, 4], True, True), dtype, seed)
    attrs.update(activation_attrs(*acts))
    rng = np.random.default_rng(seed)
    cots = {grad_slot(o): v for o, v in _outputs_like(cell, ins, rng, dtype, None).items()}
    grads = {grad_slot(p): 1 for p in PARAMS[cell]}
    _compare(Case(f"{cell}_grad", {**ins, **cots}, None, attrs, grads))
    dots = {tangent_slot(p): rng.standard_normal(ins[p].shape).astype(dtype) for p in PARAMS[cell]}
    cot_dots = {tangent_slot(grad_slot(o)): v for o, v in _outputs_like(cell, ins, rng, dtype, None).items()}
    outs = {**{tangent_slot(o): 1 for o in OUTPUTS[cell]}, **{tangent_slot(grad_slot(p)): 1 for p in PARAMS[cell]}}
    _compare(Case(f"{cell}_jvp", {**ins, **dots, **cots, **cot_dots}, None, attrs, outs))


@pytest.mark.parametrize("lens", [[5, 1, 2], [-1, 1, 2]])
@pytest.mark.parametrize("op", ["lstm", "gru_grad"])
def test_a_length_out_of_range_fails_the_run_as_numpy_does(op, lens):
    need_jax()
    cell = op.split("_")[0]
    ins = {**inputs(cell, 4, 3, 2, 2, seed=3), "SeqLens": np.asarray(lens, np.int64)}
    extra = {grad_slot("Y"): np.ones((4, 3, 2))} if op.endswith("grad") else {}
    outs = {grad_slot(p): 1 for p in PARAMS[cell] if p in ins} if extra else {}
    main, op_, feed = one_op_program(Case(op, {**ins, **extra}, None, {"is_reverse": True}, outs))
    fetch = [n for names in op_.outputs.values() for n in names]
    want, got = run_both(main, feed, fetch)
    assert isinstance(want, Exception) and isinstance(got, Exception), (want, got)
    assert "sequence lengths must be in [0, 4]" in str(got), got


def _trained(cell: str, backend: str, steps: int):
    """Every step's loss and the final parameters of a 2-layer bidirectional ``cell`` with sequence lengths,
    trained by Adam from the same initial parameters on ``backend``."""
    rng = np.random.default_rng(5)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [6, -1, 3], "float64")
        lens = layers.data("lens", [-1], "int64")
        target = layers.data("target", [6, -1, 8], "float64")
        make = layers.lstm if cell == "lstm" else layers.gru
        y, _ = make(x, 4, num_layers=2, bidirectional=True, sequence_length=lens)
        loss = layers.reduce_mean(layers.square(y - target))
        optimizer.Adam(0.05).minimize(loss)
    init = Scope()
    Executor().run(startup, scope=init)
    params = [p.name for p in main.global_block().all_parameters()]
    scope = Scope()
    for name, var in main.global_block().vars.items():  # the parameters and the optimizer's state
        if var.persistable and name in init:
            scope.set(name, np.array(init[name]))
    feed = {"x": rng.standard_normal((6, 3, 3)), "lens": np.array([6, 2, 4]), "target": rng.standard_normal((6, 3, 8))}
    exe = Executor(backend=backend)
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(steps)]
    return losses, [np.array(scope[n]) for n in params], params


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_layers_train_alike_for_5_steps(cell):
    need_jax()
    want_losses, want_params, names = _trained(cell, "numpy", 5)
    got_losses, got_params, _ = _trained(cell, "xla", 5)
    assert want_losses[-1] < want_losses[0]  # it trains
    assert_same(want_losses, got_losses, [f"loss {k}" for k in range(5)], cell)
    assert_same(want_params, got_params, names, cell)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_training_step_runs_each_recurrence_once_forward_and_once_back(cell):
    """The gradient op backpropagates through the steps' values its forward op kept: one scan forward, one back
    (running the forward again inside the gradient op would make three)."""
    need_jax()
    from gradgen.framework.backend.xla.show import lowered_text

    def scans(train: bool) -> int:
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [6, -1, 3], "float64")
            y, _ = (layers.lstm if cell == "lstm" else layers.gru)(x, 4)
            loss = layers.reduce_mean(layers.square(y))
            if train:
                optimizer.SGD(0.05).minimize(loss)
        return lowered_text(main, ["x"], [loss.name], batch=2).count("stablehlo.while")

    assert scans(False) == 1
    assert scans(True) == 2


SPECIAL = [np.nan, np.inf, -np.inf, 3e38, -0.0]
"""NaN, the infinities, a value near float32's largest and -0."""


@pytest.mark.parametrize("value", SPECIAL, ids=str)
@pytest.mark.parametrize("config", [(False, None, True, True), (True, [3, 0, 4], True, False)], ids=str)
@pytest.mark.parametrize("cell,slot", [(c, s) for c in ("lstm", "gru")
                                       for s in (*PARAMS[c], *(grad_slot(o) for o in OUTPUTS[c]))])
def test_a_special_value_in_any_input_gives_the_references_numbers(cell, slot, value, config):
    """One element of one input or output gradient NaN, infinite, near float32's end or -0: the gradient and the
    tangent ops give the reference's NaNs, infinities and values. The gradient is the reference's own
    backpropagation through time (``program/ops/recurrence.py``), not JAX's derivative of the step: that gave NaN
    in X's gradient for an infinite output gradient (dh' - dh' z), where the reference has dh' (1 - z), and other
    kinds of non-finite values for 3e38 in Y's."""
    ins, attrs = _feed(cell, (4, 3, 3, 2), config, "float32", 3)
    rng = np.random.default_rng(4)
    arrays = {**ins, **{grad_slot(o): v for o, v in _outputs_like(cell, ins, rng, "float32", None).items()}}
    arrays[slot] = arrays[slot].copy()
    arrays[slot].reshape(-1)[arrays[slot].size // 2] = value
    params = [p for p in PARAMS[cell] if p in ins]
    _compare(Case(f"{cell}_grad", arrays, None, attrs, {grad_slot(p): 1 for p in params}))
    dots = {tangent_slot(p): rng.standard_normal(ins[p].shape).astype("float32") for p in params}
    outs = {**{tangent_slot(o): 1 for o in OUTPUTS[cell]}, **{tangent_slot(grad_slot(p)): 1 for p in params}}
    _compare(Case(f"{cell}_jvp", {**arrays, **dots}, None, attrs, outs), overflow_order=value == 3e38)


def _same_up_to_the_order_of_an_overflowing_sum(want, got, names, what: str) -> None:
    """``assert_same`` where both are finite; where either is not, the other is not finite either or lies within a
    factor 1e3 of the float32 range's end: where terms near the range's end are summed, the order decides whether a
    partial sum overflows to one infinity, to the other, meets both, or none does (3e38 + 3e38 - 3e38 is inf one
    way, 3e38 the other), and XLA's products sum in another order than numpy's BLAS."""
    near_end = np.finfo(np.float32).max / 1e3
    for name, w, g in zip(names, want, got):
        both = np.isfinite(w) & np.isfinite(g)
        assert_same([np.where(both, w, 0)], [np.where(both, g, 0)], [name], what)
        for one, other in ((w, g), (g, w)):
            order_bound = ~np.isfinite(one) & np.isfinite(other)
            assert (np.abs(other[order_bound]) >= near_end).all(), (what, name, one, other)
