"""``gradgen modes``: both modes built for one program, counted and measured (no timing is asserted)."""
from __future__ import annotations

from gradgen.framework.tools.cli import main as cli
from gradgen.framework.tools.modes import ModeReport, compare_modes, estimate_flops, modes_text
from gradgen.program import Program, layers, program_guard


def _curve():
    """Three parameters, 500 outputs: forward mode needs 3 passes, reverse mode 500."""
    program = Program()
    with program_guard(program, Program()):
        t = layers.data("t", [-1, 1], "float64")
        theta = layers.data("theta", [1, 3], "float64")
        a, f, d = layers.split(theta, [1, 1, 1], 1)
        layers.multiply(layers.multiply(a, layers.sin(layers.multiply(f, t))),
                        layers.exp(layers.scale(layers.multiply(d, t), -1.0)), name="y")
    return program


def test_passes_are_the_output_and_input_sizes():
    reverse, forward = compare_modes(_curve(), ["y"], ["theta"], {"t": (500, 1)}, repeats=1)
    assert (reverse.mode, reverse.passes) == ("reverse", 500)
    assert (forward.mode, forward.passes) == ("forward", 3)
    for r in (reverse, forward):
        assert r.ops_emitted > 0 and r.flops_per_pass > 0 and r.peak_bytes > 0 and r.seconds_per_pass > 0


def test_the_program_is_left_as_it_was():
    program = _curve()
    before = program.to_json()
    compare_modes(program, ["y"], ["theta"], {"t": (10, 1)}, repeats=1)
    assert program.to_json() == before


def test_flops_of_a_matmul_are_two_per_multiply_add():
    program = Program()
    with program_guard(program, Program()):
        x = layers.data("x", [-1, 30], "float64")
        w = layers.data("w", [30, 20], "float64")
        layers.matmul(x, w)
    assert estimate_flops(program, {"x": (8, 30)}) == 2 * 8 * 20 * 30


def test_the_table_names_the_mode_with_the_cheaper_jacobian():
    cheap = ModeReport("forward", 5, 100, 1024, 0.002, 3)
    dear = ModeReport("reverse", 6, 120, 2048, 0.001, 500)
    text = modes_text([dear, cheap])
    assert "| passes for the full Jacobian   |            500 |              3 |" in text
    assert "winner for the full Jacobian: forward mode (3 passes of 2 ms against 500 passes of 1 ms)" in text


def test_the_command_prints_the_table(tmp_path, capsys):
    path = tmp_path / "curve.json"
    _curve().save(path)
    assert cli(["modes", str(path), "--outputs", "y", "--wrt", "theta", "--feed-shape", "t=50,1",
                "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "passes for the full Jacobian" in out and "winner for the full Jacobian: " in out
    assert cli(["modes", str(path), "--outputs", "nope", "--wrt", "theta"]) == 1
    assert "--outputs var 'nope' is not a var" in capsys.readouterr().err


def test_fed_values_size_the_program_and_replace_random_ones(tmp_path, capsys):
    """A loop count must be given, not drawn: --feed values are used as they are (and size the -1 dims)."""
    import numpy as np

    reverse, forward = compare_modes(_curve(), ["y"], ["theta"], {}, repeats=1,
                                     values={"t": np.linspace(0.0, 1.0, 40).reshape(40, 1)})
    assert (reverse.passes, forward.passes) == (40, 3)
    path = tmp_path / "curve.json"
    _curve().save(path)
    np.save(tmp_path / "t.npy", np.ones((7, 1)))
    assert cli(["modes", str(path), "--outputs", "y", "--wrt", "theta", "--feed", f"t={tmp_path / 't.npy'}",
                "--repeats", "1"]) == 0
    assert "|              7 |              3 |" in capsys.readouterr().out


def _flops_by_output(program, feed_shapes) -> dict:
    """FLOPs of each op of the global block, by the name of its first output."""
    from gradgen.framework.tools.modes import _op_flops, _shape_of
    from gradgen.framework.tools.summary import batch_size
    block = program.global_block()
    shape = _shape_of(block, feed_shapes, batch_size(block, feed_shapes))
    return {op.output_arg_names[0].split("@RENAME")[0]: (op.type, _op_flops(op, shape)) for op in block.ops}


def test_convolutions_and_their_adjoints_count_their_multiply_adds():
    """conv2d and both its adjoints: every output position meets C/groups x kernel taps; the transposed
    convolution: every input position does. A strided, grouped, padded case, so a count of the wrong side's
    positions (the transposed conv's output is larger than its input) gives another number."""
    from gradgen.framework.passes.backward import append_backward
    program = Program()
    with program_guard(program, Program()):
        x = layers.data("x", [-1, 4, 9, 7], "float64")
        x.stop_gradient = False
        y = layers.conv2d(x, 6, (3, 2), stride=2, padding=1, groups=2, bias=False, name="c")
        t = layers.conv2d_transpose(y, 4, 3, stride=2, bias=False, name="t")
        append_backward(layers.reduce_sum(t))
    flops = _flops_by_output(program, {"x": (5, 4, 9, 7)})
    conv_out = 5 * 6 * ((9 + 2 - 3) // 2 + 1) * ((7 + 2 - 2) // 2 + 1)   # N x O x OH x OW
    conv = 2 * conv_out * (4 // 2) * 3 * 2
    assert flops[y.name] == ("conv2d", conv)
    assert flops["x@GRAD"] == ("conv2d_input_grad", conv)
    assert flops["c.w@GRAD"] == ("conv2d_filter_grad", conv)
    transposed = 2 * conv_out * 4 * 3 * 3  # input positions x C_out x kernel
    assert flops[t.name] == ("conv2d_transpose", transposed)
    assert flops["c@GRAD"] == ("conv2d", transposed) and flops["t.w@GRAD"] == ("conv2d_filter_grad", transposed)


def test_a_transposed_or_vector_matmul_contracts_the_right_dim():
    program = Program()
    with program_guard(program, Program()):
        a = layers.data("a", [7, 3], "float64")
        b = layers.data("b", [7, 5], "float64")
        layers.matmul(a, b, transpose_x=True)
    assert estimate_flops(program, {}) == 2 * 3 * 5 * 7
    program = Program()
    with program_guard(program, Program()):
        layers.matmul(layers.data("v", [7], "float64"), layers.data("m", [7, 5], "float64"))
    assert estimate_flops(program, {}) == 2 * 5 * 7
