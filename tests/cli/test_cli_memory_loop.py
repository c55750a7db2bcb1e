"""``gradgen run --memory`` and the explain page on a while loop whose trip count is fed (issue 24 item 10)."""
from __future__ import annotations

import numpy as np

from gradgen.framework import gradients
from gradgen.framework.tools.explain.model import page_model
from gradgen.framework.tools.memory import analyze_memory
from gradgen.program import Program, layers, program_guard

from .test_cli import gradgen


def _doubling_loop(differentiated: bool = True):
    """``out`` = a doubled n times (times ``1 + 0 * h``, so that the gradient loop reads each iteration's h from
    the loop's history); with ``differentiated``, d sum(out) / da too, else the history is read by nothing."""
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [3], "float64")
        a.stop_gradient = False
        n = layers.data("n", [], "int64")
        one = layers.fill_constant([], "int64", 1)
        _, out = layers.while_loop(lambda t, h: layers.less_than(t, n),
                                   lambda t, h: [layers.add(t, one), layers.scale(h * layers.scale(h, 0.0, 1.0), 2.0)],
                                   [layers.fill_constant([], "int64", 0), a])
        fetch = [out.name]
        if differentiated:
            fetch += [g.name for g in gradients(layers.reduce_sum(out), [a])]
    return main, fetch


def _saved_loop(tmp_path) -> list[str]:
    """The loop saved as ctrl.json with feeds a.npy (ones) and n.npy (5) beside it; the fetched vars' names."""
    program, fetch = _doubling_loop()
    program.save(tmp_path / "ctrl.json")
    np.save(tmp_path / "a.npy", np.ones(3))
    np.save(tmp_path / "n.npy", np.int64(5))
    return fetch


def test_run_memory_sizes_the_loop_history_from_the_run(tmp_path):
    out, grad = _saved_loop(tmp_path)
    result = gradgen("run", tmp_path / "ctrl.json", "--feed", f"a={tmp_path / 'a.npy'}",
                     "--feed", f"n={tmp_path / 'n.npy'}", "--fetch", f"{out},{grad}", "--memory")
    assert result.returncode == 0, result.stderr
    assert f"{out}: " in result.stdout and "32" in result.stdout  # 2**5
    assert "not counted" not in result.stdout
    history = "while_0.history1"  # the row of h per iteration, which the gradient loop reads: 5 x 3 float64
    assert f"{history}" in result.stdout and "120 B" in result.stdout, result.stdout


def test_without_a_run_the_history_is_named_as_not_counted_and_the_rest_is_analyzed():
    program, fetch = _doubling_loop()
    report = analyze_memory(program, {"a": (3,), "n": ()}, fetch)
    assert report.unsized == ("while_0.history1",)  # the counter's history is read by nothing: never made
    assert report.peak_bytes > 0
    measured = analyze_memory(program, {"a": (3,), "n": ()}, fetch, measured={"while_0.history1": (5, 3)})
    assert measured.unsized == () and measured.peak_bytes >= report.peak_bytes + 5 * 3 * 8
    page = page_model(program, {"a": [3], "n": []})
    assert page["memory_error"] is None and page["memory"]["steps"]
    assert "while_0.history1" in page["memory"]["sentence"]


def test_a_history_nothing_reads_is_not_made_and_counts_nothing():
    """A forward-only loop: the run stacks no history (``while`` is told it is dropped), so the analysis neither
    counts it nor asks for its size (it used to list both as not counted, and counted them when measured)."""
    program, fetch = _doubling_loop(differentiated=False)
    report = analyze_memory(program, {"a": (3,), "n": ()}, fetch)
    assert report.unsized == ()
    sized = analyze_memory(program, {"a": (3,), "n": ()}, fetch,
                           measured={"while_0.history0": (5,), "while_0.history1": (5, 3)})
    assert sized.peak_bytes == report.peak_bytes


def test_a_known_batch_does_not_size_a_loop_history():
    """Before: the history's -1 took the batch size of the feeds, a silently wrong size."""
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        x.stop_gradient = False
        n = layers.data("n", [], "int64")
        one = layers.fill_constant([], "int64", 1)
        _, h = layers.while_loop(lambda t, h: layers.less_than(t, n), lambda t, h: [layers.add(t, one), layers.tanh(h)],
                                 [layers.fill_constant([], "int64", 0), x])
        (grad,) = gradients(layers.reduce_sum(h), [x])
    report = analyze_memory(main, {"x": (4, 3), "n": ()}, [grad.name])
    assert set(report.unsized) == {"while_0.history1"}


def test_modes_on_the_loop_reports_a_peak(tmp_path):
    out = _saved_loop(tmp_path)[0]
    result = gradgen("modes", tmp_path / "ctrl.json", "--outputs", out, "--wrt", "a", "--feed", f"a={tmp_path / 'a.npy'}",
                     "--feed", f"n={tmp_path / 'n.npy'}", "--repeats", "1")
    assert result.returncode == 0, result.stderr
    assert "peak live memory per pass" in result.stdout
