"""The GRU on the torch engine (ATen's recurrence, its gradient by autograd: ``backend/torch/kernels/recurrent.py``)
against the numpy reference: ``gru`` and ``gru_grad`` as one-op programs in float32 and float64 (both directions,
biases and initial states given or not, each cotangent absent in turn, zero steps, an empty batch, no input
features, one step of one, sequence lengths), NaN, the infinities, the range's end and -0 in every input and in a
batch's padding, ``layers.gru`` trained alike, the forward recorded once for its gradient, and what it refuses,
named before anything runs."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from gradgen.program import Program, layers, program_guard
from gradgen.program.ops.recurrent import OUTPUTS, PARAMS, grad_slot
from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.test_torch_recurrent import CONFIGS, SHAPES, _compare, _cotangents, _feed, _grad_case, _trained
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_layer_and_its_gradient_match_numpy(shape, config, dtype):
    seed = sum(shape) + 10 * CONFIGS.index(config)
    ins, attrs = _feed(shape, config, seed, "gru", dtype)
    _compare(Case("gru", ins, None, attrs))
    rng = np.random.default_rng(seed)
    for absent in (None, *OUTPUTS["gru"]):  # each cotangent absent (zero) in turn
        _compare(_grad_case(ins, attrs, _cotangents(ins, rng, absent, "gru"), "gru"))


LENGTHS = [[4, 1, 2], [0, 4, 3], [0, 0, 0], [4, 4, 4], [1, 0, 1]]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
def test_sequence_lengths_match_numpy(lengths, config, dtype):
    """Each sequence its own steps (a packed batch on ATen; one of length 0 left out of ATen's call), both
    directions, forward and each cotangent absent in turn."""
    ins, attrs = _feed((4, 3, 3, 2), config, sum(lengths), "gru")
    ins = {**ins, "SeqLens": np.array(lengths, dtype)}
    _compare(Case("gru", ins, None, attrs))
    rng = np.random.default_rng(len(lengths))
    for absent in (None, *OUTPUTS["gru"]):
        _compare(_grad_case(ins, attrs, _cotangents(ins, rng, absent, "gru"), "gru"))


@pytest.mark.parametrize("cell,engine", [("gru", "torch"), ("gru", "xla"), ("lstm", "xla")])
@pytest.mark.parametrize("reverse", [False, True])
def test_steps_past_a_sequences_length_are_not_read(reverse, cell, engine):
    """NaN and an infinity past each sequence's end, and all through one of length 0 (a batch's padding): the
    outputs and every gradient are finite on the reference, and the same on xla and torch (the torch engine refuses
    the LSTM's lengths)."""
    from tests.backends.xla_harness import need_jax

    (need_jax if engine == "xla" else need_torch)()
    ins, attrs = _feed((4, 3, 3, 2), (reverse, True), 5, cell)
    x = ins["X"].copy()
    x[2:, 0], x[:, 1], x[1:, 2] = np.nan, np.inf, np.nan
    ins = {**ins, "X": x, "SeqLens": np.array([2, 0, 1], np.int64)}
    for case in (Case(cell, ins, None, attrs),
                 _grad_case(ins, attrs, _cotangents(ins, np.random.default_rng(6), None, cell), cell)):
        main, op, feed = one_op_program(case)
        fetch = op.output_arg_names
        want = run_on("numpy", main, feed, fetch)
        assert all(np.isfinite(w).all() for w in want), case.op
        got = run_on(engine, main, feed, fetch)
        assert_same(want, got, fetch, f"{engine} {case.op}")


@pytest.mark.parametrize("lengths", [[5, 1, 2], [-1, 1, 2]])
def test_a_length_outside_the_time_axis_fails_as_on_numpy(lengths):
    need_torch()
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1, "gru")
    main, op, feed = one_op_program(Case("gru", {**ins, "SeqLens": np.array(lengths, np.int64)}, None, attrs))
    for engine in ("numpy", "torch"):
        got = run_on(engine, main, feed, op.output_arg_names)
        assert isinstance(got, ExecutionError) and "sequence lengths must be in [0, 4]" in str(got), (engine, got)


def test_a_gradient_without_cotangents_is_zero():
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1, "gru")
    _compare(_grad_case(ins, attrs, {}, "gru"))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 3e38, -0.0])
@pytest.mark.parametrize("slot", ["X", "W", "R", "WB", "RB", "H0", "Y@GRAD", "H@GRAD"])
def test_a_special_value_in_any_input_gives_the_references_numbers(slot, value):
    """One element of one input NaN, infinite, near the float32 range's end or -0, forward and gradient: ATen's
    cell and autograd give the reference's NaNs, infinities and values; a gradient whose output gradients are not
    all finite runs step by step (autograd's gradient of h' = (h - n) z + n in n is dh' - dh' z, NaN for an
    infinite dh', where the reference writes dh' (1 - z)), and gives the reference's infinities too."""
    ins, attrs = _feed((5, 3, 4, 3), (slot == "R", True), 3, "gru")
    cots = _cotangents(ins, np.random.default_rng(4), None, "gru")
    arrays = {**ins, **cots}
    arrays[slot] = arrays[slot].copy()
    arrays[slot].reshape(-1)[arrays[slot].size // 2] = value
    if not slot.endswith("@GRAD"):
        _compare(Case("gru", {k: v for k, v in arrays.items() if k in ins}, None, attrs))
    _compare(_grad_case({k: v for k, v in arrays.items() if k in ins}, attrs, {k: arrays[k] for k in cots}, "gru"))


LAYERS = [{}, {"num_layers": 2, "bidirectional": True}, {"batch_first": True, "bias": False}]


@pytest.mark.parametrize("options", LAYERS, ids=str)
def test_layers_gru_trains_as_on_numpy(options):
    need_torch()
    want_losses, want, names = _trained("numpy", cell="gru", **options)
    got_losses, got, _ = _trained("torch", cell="gru", **options)
    assert_same(want_losses, got_losses, ["loss"] * len(want_losses), str(options))
    assert_same(want, got, names, str(options))
    assert len({float(v) for v in want_losses}) == len(want_losses)  # the steps trained: each loss another


def test_the_gradient_reads_the_forward_recorded_once(monkeypatch):
    """A training step runs ATen's GRU once a direction: the gradient goes back through the forward the ``gru`` op
    recorded. A gradient op alone (no forward of its inputs in the block) records the forward itself, and so does
    a second gradient of one forward (autograd frees what it recorded as it goes back)."""
    need_torch()
    from gradgen.framework.backend.torch.kernels import recurrent

    calls = []
    real = recurrent.torch.gru

    def counting(*args):
        calls.append(args[0].shape[0])
        return real(*args)

    monkeypatch.setattr(recurrent.torch, "gru", counting)
    _trained("torch", steps=2, cell="gru")
    assert len(calls) == 2
    calls.clear()
    _trained("torch", steps=2, cell="gru", bidirectional=True)  # two directions reading one X: each finds its own
    assert len(calls) == 4
    calls.clear()
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1, "gru")
    main, op, feed = one_op_program(_grad_case(ins, attrs, _cotangents(ins, np.random.default_rng(0), None, "gru"),
                                               "gru"))
    Executor(backend="torch").run(main, feed=feed, fetch_list=op.output_arg_names, scope=Scope())
    assert len(calls) == 1
    calls.clear()
    _twice_differentiated()
    assert len(calls) == 2


def _twice_differentiated() -> None:
    """One forward and two gradient ops of it (the loss's and a second cotangent's), run once on torch, compared
    with numpy."""
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 1, "gru")
    main = Program()
    with program_guard(main, Program()):
        block = main.global_block()
        given = {s: layers.data(s, list(a.shape), "float32") for s, a in ins.items()}
        block.append_op("gru", {s: [v] for s, v in given.items()}, {"Y": ["y"], "H": ["h"]}, attrs)
        for k in range(2):
            dy = layers.data(f"dy{k}", [4, 3, 2], "float32")
            block.append_op("gru_grad", {**{s: [v] for s, v in given.items()}, "Y@GRAD": [dy]},
                            {grad_slot(s): [f"d{s.lower()}{k}"] for s in given}, attrs)
    rng = np.random.default_rng(5)
    feed = {**ins, **{f"dy{k}": rng.standard_normal((4, 3, 2)).astype(np.float32) for k in range(2)}}
    fetch = ["y", "dx0", "dx1"]
    assert_same(run_on("numpy", main, feed, fetch), run_on("torch", main, feed, fetch), fetch, "twice")


def _not_fused_case(kind: str) -> Case:
    ins, attrs = _feed((4, 3, 3, 2), (False, True), 0, "gru")
    if kind == "onnx":
        return Case("gru", ins, None, {**attrs, "linear_before_reset": False})
    return Case("gru_grad", {**ins, "Y@GRAD": np.ones((4, 3, 2), np.float32)}, None,
                {**attrs, "activations": ["hardsigmoid", "relu"]}, {grad_slot(p): 1 for p in PARAMS["gru"]})


@pytest.mark.parametrize("kind", ["onnx", "activations"])
def test_what_aten_does_not_run_runs_step_by_step_as_numpy_does(kind):
    from gradgen.framework.backend.torch.kernels.recurrent import gru_not_fused

    case = _not_fused_case(kind)
    assert gru_not_fused(one_op_program(case)[1]) is not None
    _compare(case)


def test_auto_weighs_the_torch_engine_for_a_gru():
    from gradgen.framework.backend import WEIGHED_FOR

    main = Program()
    with program_guard(main, Program()):
        layers.reduce_sum(layers.gru(layers.data("x", [2, -1, 3], "float32"), 2)[0])
    assert WEIGHED_FOR["torch"](main.global_block(), 4) is None
