"""``layers.lstm``/``layers.gru`` with ``activations=``: every layer and direction computes the step-by-step
reference with those activations (names alone take ONNX's default alpha and beta); a name ONNX does not define
is refused when the program is built."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import ProgramError
from tests.recurrent.cases import reference

ACTS = {"lstm": ["hardsigmoid", ("scaledtanh", 1.5, 0.7), ("leakyrelu", 0.1, None)],
        "gru": [("hardsigmoid", 0.3, 0.4), "elu"]}
RESOLVED = {"lstm": [("hardsigmoid", 0.2, 0.5), ("scaledtanh", 1.5, 0.7), ("leakyrelu", 0.1, 0.0)],
            "gru": [("hardsigmoid", 0.3, 0.4), ("elu", 1.0, 0.0)]}


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_every_layer_and_direction_uses_the_activations(cell):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [4, 2, 3], "float64")
        y, _ = getattr(layers, cell)(x, 2, num_layers=2, bidirectional=True, name="rnn", activations=ACTS[cell])
    scope = Scope()
    Executor().run(startup, scope=scope)
    xs = np.random.default_rng(3).standard_normal((4, 2, 3))
    (got,) = Executor().run(main, feed={"x": xs}, fetch_list=[y], scope=scope)
    seq = xs
    for layer in range(2):
        outs = []
        for d, suffix in enumerate(("", "_reverse")):
            p = {k: np.array(scope[f"rnn.{n}_l{layer}{suffix}"]) for k, n in
                 (("W", "weight_ih"), ("R", "weight_hh"), ("WB", "bias_ih"), ("RB", "bias_hh"))}
            outs.append(reference(cell, {"X": seq, **p}, bool(d), acts=RESOLVED[cell])["Y"])
        seq = np.concatenate(outs, axis=2)
    np.testing.assert_allclose(got, seq, rtol=1e-12, atol=1e-12)


def test_an_unknown_activation_is_refused_by_name():
    with program_guard(Program(), Program()):
        x = layers.data("x", [4, 2, 3], "float64")
        with pytest.raises(ProgramError, match="gelu"):
            layers.gru(x, 2, activations=["sigmoid", "gelu"])


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_defaults_spelled_as_onnx_spells_them_compute_what_no_activations_do(cell):
    """``DEFAULT_ACTIVATIONS`` is in ONNX's spelling (``Sigmoid``, ``Tanh``); names match in any case, so giving
    them explicitly, in either case, is the default step, bit for bit."""
    from gradgen.program.ops.recurrent import DEFAULT_ACTIVATIONS, default_activations
    assert all(name[0].isupper() for name in DEFAULT_ACTIVATIONS[cell])
    xs = np.random.default_rng(5).standard_normal((4, 2, 3))
    results = []
    for acts in (None, list(DEFAULT_ACTIVATIONS[cell]), default_activations(cell)):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            x = layers.data("x", [4, 2, 3], "float64")
            y, _ = getattr(layers, cell)(x, 2, name="rnn", activations=acts)
        scope = Scope()
        Executor(backend="numpy").run(startup, scope=scope)
        for name in scope.keys():
            scope.set(name, np.random.default_rng(len(name)).standard_normal(np.shape(scope[name])))
        results.append(Executor(backend="numpy").run(main, feed={"x": xs}, fetch_list=[y], scope=scope)[0])
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])
