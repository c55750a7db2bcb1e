"""The prune pass: what it keeps, what it drops, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, prune
from gradgen.framework.passes.prune import PruneError, needed_ops, required_inputs
from gradgen.program import Program, layers, program_guard, verify

from .models import reference_prediction, trained_regression


def test_pruning_a_training_program_to_its_prediction_keeps_the_forward_ops_it_needs():
    main, _, scope, v = trained_regression()
    infer = prune(main, [v["pred"].name], feeds=["x"], for_test=True)
    block = infer.global_block()
    assert [op.type for op in block.ops] == ["matmul", "elementwise_add", "tanh", "dropout", "reshape", "batch_norm",
                                             "reshape", "matmul", "elementwise_add"]
    assert all(op.role == "forward" for op in block.ops)
    assert all(op.attr("is_test") for op in block.ops if op.type in ("dropout", "batch_norm"))
    assert "y" not in block.vars and "learning_rate_float64_0" not in block.vars
    assert not any("@GRAD" in n for n in block.vars)
    assert required_inputs(block) == (["x"], ["fc_0.w_0", "fc_0.b_0", "batch_norm_0.scale", "batch_norm_0.bias",
                                             "batch_norm_0.mean", "batch_norm_0.variance", "fc_1.w_0", "fc_1.b_0"])
    verify(infer)
    xs = np.random.default_rng(1).standard_normal((4, 3))
    (got,) = Executor().run(infer, feed={"x": xs}, fetch_list=[v["pred"].name], scope=scope)
    np.testing.assert_allclose(got, reference_prediction(scope, xs), rtol=1e-12)


def test_the_source_program_is_left_alone():
    main, _, _, v = trained_regression()
    before = main.to_json()
    prune(main, [v["pred"].name], for_test=True)
    assert main.to_json() == before


def test_without_feeds_whatever_the_kept_ops_read_becomes_a_feed():
    main, _, _, v = trained_regression()
    assert required_inputs(prune(main, [v["loss"].name]).global_block())[0] == ["x", "y"]


def test_a_feed_cuts_the_walk():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        h = layers.tanh(x, name="h")
        out = layers.exp(h, name="out")
    assert [main.global_block().ops[i].type for i in needed_ops(main.global_block(), [out.name])] == ["tanh", "exp"]
    pruned = prune(main, ["out"], feeds=["h"])
    assert [op.type for op in pruned.global_block().ops] == ["exp"]
    assert "x" not in pruned.global_block().vars
    (got,) = Executor().run(pruned, feed={"h": np.array([0.0, 1.0])}, fetch_list=["out"], scope=Scope())
    np.testing.assert_allclose(got, np.exp([0.0, 1.0]))


def test_fetching_an_updated_parameter_keeps_its_update_and_gradient():
    main, _, _, v = trained_regression()
    kept = prune(main, ["fc_1.b_0"]).global_block().ops
    assert kept[-1].type == "sgd" and kept[-1].output("ParamOut") == ["fc_1.b_0"]
    assert {op.role for op in kept} == {"forward", "backward", "optimize"}


def test_dropped_control_flow_ops_take_their_blocks_along():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [], "float64")
        flag = layers.greater_than(x, layers.fill_constant([], "float64", 0.0))
        layers.cond(flag, lambda: layers.exp(x), lambda: layers.sin(x))
        kept = layers.tanh(x, name="kept")
    assert len(main.blocks) == 3
    pruned = prune(main, [kept.name], feeds=["x"])
    assert len(pruned.blocks) == 1 and [op.type for op in pruned.global_block().ops] == ["tanh"]
    verify(pruned)


def test_a_kept_cond_keeps_its_blocks_and_runs():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [], "float64")
        flag = layers.greater_than(x, layers.fill_constant([], "float64", 0.0))
        out = layers.cond(flag, lambda: layers.exp(x), lambda: layers.sin(x))
        layers.tanh(x, name="dropped")
    pruned = prune(main, [out.name], feeds=["x"])
    assert len(pruned.blocks) == 3 and "dropped" not in pruned.global_block().vars
    for value, expected in ((1.0, np.exp(1.0)), (-1.0, np.sin(-1.0))):
        (got,) = Executor().run(pruned, feed={"x": np.array(value)}, fetch_list=[out], scope=Scope())
        np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize("fetches,feeds,for_test,message", [
    (["nope"], None, False, "fetch 'nope' names no var of the program"),
    (["elementwise_add_1"], ["nope"], False, "feed 'nope' names no var"),
    (["elementwise_add_1"], [], False, r"op #0 \(matmul\).* needs x: float64\[-1, 3\], which is not among the feeds"),
    (["mean_0"], ["x"], False, r"needs y: float64\[-1, 1\], which is not among the feeds \(x\)"),
    (["fc_0.w_0@GRAD"], ["x", "y"], True, "is a backward op that the fetches need"),
    ([], None, False, "at least one fetch"),
])
def test_errors_name_the_problem(fetches, feeds, for_test, message):
    main, _, _, _ = trained_regression()
    with pytest.raises(PruneError, match=message):
        prune(main, fetches, feeds=feeds, for_test=for_test)
