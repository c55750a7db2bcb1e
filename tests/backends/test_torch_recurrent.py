"""The LSTM on the torch engine (oneDNN's RNN primitive, ``backend/torch/kernels/recurrent.py``) against the numpy
reference: ``lstm`` and ``lstm_grad`` as one-op programs (both directions, biases and initial states given or not,
each cotangent absent in turn, zero steps, an empty batch, no input features, one step of one), NaN and the
infinities in every input, ``layers.lstm`` trained alike (two layers, both directions, batch first, no biases), the
gradient reading the forward's kept workspace instead of running it again, what oneDNN does not run (float64,
sequence lengths, other activations) and the tangent op run step by step as numpy runs them
(``test_torch_stepwise.py`` holds more). ``test_torch_gru.py`` holds the GRU's."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot, tangent_slot
from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program
from tests.recurrent.cases import inputs

SHAPES = [(4, 3, 3, 2), (1, 1, 2, 3), (6, 5, 4, 7), (0, 2, 3, 2), (3, 0, 2, 2), (3, 2, 0, 2)]
"""(steps, batch, features, hidden): general ones, one step of batch 1, zero steps, an empty batch, no features."""

CONFIGS = [(False, True), (True, False), (True, True), (False, False)]
"""(is_reverse, biases and initial states given)."""


def _feed(shape, config, seed: int, cell: str = "lstm", dtype: str = "float32") -> tuple[dict, dict]:
    reverse, full = config
    return inputs(cell, *shape, seed=seed, dtype=dtype, bias=full, initial=full), {"is_reverse": reverse}


def _cotangents(ins: dict, rng, absent: str | None, cell: str = "lstm") -> dict:
    steps, batch, hidden = ins["X"].shape[0], ins["X"].shape[1], ins["R"].shape[1]
    shapes = {"Y": (steps, batch, hidden), "H": (batch, hidden), "C": (batch, hidden)}
    return {grad_slot(o): rng.standard_normal(shapes[o]).astype(ins["X"].dtype) for o in OUTPUTS[cell] if o != absent}


def _compare(case: Case) -> None:
    need_torch()
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    want, got = run_on("numpy", main, feed, fetch), run_on("torch", main, feed, fetch)
    assert not isinstance(want, Exception), want
    assert_same(want, got, fetch, case.id)


def _grad_case(ins: dict, attrs: dict, cotangents: dict, cell: str = "lstm") -> Case:
    return Case(f"{cell}_grad", {**ins, **cotangents}, None, attrs, {grad_slot(p): 1 for p in PARAMS[cell] if p in ins})


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_layer_and_its_gradient_match_numpy(shape, config):
    seed = sum(shape) + 10 * CONFIGS.index(config)
    ins, attrs = _feed(shape, config, seed)
    _compare(Case("lstm", ins, None, attrs))
    rng = np.random.default_rng(seed)
    for absent in (None, *OUTPUTS["lstm"]):  # each cotangent absent (zero) in turn
        _compare(_grad_case(ins, attrs, _cotangents(ins, rng, absent)))


def test_a_gradient_without_cotangents_is_zero_but_for_nothing():
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1)
    _compare(_grad_case(ins, attrs, {}))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 3e38, -0.0])
@pytest.mark.parametrize("slot", ["X", "W", "R", "WB", "H0", "C0", "Y@GRAD", "C@GRAD"])
def test_a_special_value_in_any_input_gives_the_references_numbers(slot, value):
    """One element of one input NaN, infinite, near the float32 range's end or -0, forward and gradient: oneDNN's
    cell gives the reference's NaNs, infinities and values."""
    ins, attrs = _feed((5, 3, 4, 3), (slot == "R", True), 3)
    cots = _cotangents(ins, np.random.default_rng(4), None)
    arrays = {**ins, **cots}
    arrays[slot] = arrays[slot].copy()
    arrays[slot].reshape(-1)[arrays[slot].size // 2] = value
    if not slot.endswith("@GRAD"):
        _compare(Case("lstm", {k: v for k, v in arrays.items() if k in ins}, None, attrs))
    _compare(_grad_case({k: v for k, v in arrays.items() if k in ins}, attrs, {k: arrays[k] for k in cots}))


def _trained(backend: str, steps: int = 5, cell: str = "lstm", **options):
    """``steps`` losses of a ``layers.<cell>`` trained by Adam on ``backend``, and its parameters by name."""
    rng = np.random.default_rng(2)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 6, 3] if options.get("batch_first") else [6, -1, 3], "float32")
        y, states = getattr(layers, cell)(x, 4, **options)
        h, c = states if cell == "lstm" else (states, states)
        loss = layers.reduce_mean(layers.square(y)) + layers.reduce_sum(h * c)
        optimizer.Adam(0.05).minimize(loss)
    feed = {"x": rng.standard_normal((5, 6, 3) if options.get("batch_first") else (6, 5, 3)).astype(np.float32)}
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)  # (the initializers' draws: the same on every engine)
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(steps)]
    params = sorted(p.name for p in main.global_block().all_parameters())
    return losses, [scope[p] for p in params], params


LAYERS = [{}, {"num_layers": 2, "bidirectional": True}, {"batch_first": True, "bias": False}]


@pytest.mark.parametrize("options", LAYERS, ids=str)
def test_layers_lstm_trains_as_on_numpy(options):
    need_torch()
    want_losses, want, names = _trained("numpy", **options)
    got_losses, got, _ = _trained("torch", **options)
    assert_same(want_losses, got_losses, ["loss"] * len(want_losses), str(options))
    assert_same(want, got, names, str(options))
    assert len({float(v) for v in want_losses}) == len(want_losses)  # the steps trained: each loss another


def test_the_gradient_reads_the_forwards_kept_workspace(monkeypatch):
    """A training step runs oneDNN's forward once: the gradient reads what the forward kept for its X. A gradient
    op alone (no forward of its inputs in the block) runs the forward itself."""
    need_torch()
    from gradgen.framework.backend.torch.kernels import recurrent

    calls = []

    class Counting:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(recurrent.torch.ops.aten, name)

    monkeypatch.setattr(recurrent, "_aten", Counting())
    _trained("torch", steps=2)
    assert calls.count("mkldnn_rnn_layer") == 2 and calls.count("mkldnn_rnn_layer_backward") == 2
    calls.clear()
    _trained("torch", steps=2, bidirectional=True)  # two directions reading one X: each finds its own
    assert calls.count("mkldnn_rnn_layer") == 4 and calls.count("mkldnn_rnn_layer_backward") == 4
    calls.clear()
    _side_by_side()
    assert calls.count("mkldnn_rnn_layer") == 2 and calls.count("mkldnn_rnn_layer_backward") == 2
    calls.clear()
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1)
    main, op, feed = one_op_program(_grad_case(ins, attrs, _cotangents(ins, np.random.default_rng(0), None)))
    Executor(backend="torch").run(main, feed=feed, fetch_list=op.output_arg_names, scope=Scope())
    assert calls == ["mkldnn_rnn_layer", "mkldnn_rnn_layer_backward"]


def _side_by_side() -> None:
    """A training step of two LSTMs of one direction reading the same X, run once on torch."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [6, -1, 3], "float32")
        loss = layers.reduce_mean(layers.lstm(x, 4)[0]) + layers.reduce_mean(layers.lstm(x, 2)[0])
        optimizer.SGD(0.1).minimize(loss)
    exe, scope = Executor(backend="torch"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": np.ones((6, 2, 3), np.float32)}, fetch_list=[loss], scope=scope)


def _not_fused_case(kind: str) -> Case:
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 0)
    if kind == "float64":
        return Case("lstm", {k: v.astype(np.float64) for k, v in ins.items()}, None, attrs)
    if kind == "lengths":
        return Case("lstm", {**ins, "SeqLens": np.array([4, 1, 2], np.int32)}, None, attrs)
    if kind == "activations":
        return Case("lstm_grad", {**ins, "Y@GRAD": np.ones((4, 3, 2), np.float32)}, None,
                    {**attrs, "activations": ["hardsigmoid", "tanh", "tanh"]},
                    {grad_slot(p): 1 for p in PARAMS["lstm"]})
    dots = {tangent_slot("W"): np.ones_like(ins["W"])}
    return Case("lstm_jvp", {**ins, **dots}, None, attrs, {tangent_slot("Y"): 1})


@pytest.mark.parametrize("kind", ["float64", "lengths", "activations"])
def test_what_onednn_does_not_run_runs_step_by_step_as_numpy_does(kind):
    from gradgen.framework.backend.torch.kernels.recurrent import not_fused

    case = _not_fused_case(kind)
    assert not_fused(one_op_program(case)[1]) is not None
    _compare(case)


def test_the_tangent_op_runs_step_by_step_as_numpy_does():
    _compare(_not_fused_case("jvp"))


def test_auto_weighs_the_torch_engine_for_an_lstm_whatever_its_size():
    from gradgen.framework.backend import WEIGHED_FOR

    for with_lstm in (True, False):
        main = Program()
        with program_guard(main, Program()):
            x = layers.data("x", [2, -1, 3], "float32")
            out = layers.lstm(x, 2)[0] if with_lstm else layers.tanh(x)
            layers.reduce_sum(out)
        why = WEIGHED_FOR["torch"](main.global_block(), 4)
        assert (why is None) == with_lstm, why
        assert with_lstm or "or an LSTM or GRU layer" in why
