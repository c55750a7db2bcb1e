"""The metric layers' one-op programs (accuracy, precision/recall, auc) exported to ONNX: ONNX Runtime computes what
the executor computes, with the batch dim -1 met at run time and auc counters carried in from earlier runs; and a
re-import (ONNX has no metric op) gives ordinary gradgen ops that compute the same values again."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, layers, program_guard
from tests.onnx.runtime import assert_close, require, run_ort

METRIC_OPS = ("accuracy", "precision_recall", "auc")


def _program(dtype: str, label_dtype: str):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 5], dtype)
        y = layers.data("y", [-1, 1], label_dtype)
        p = layers.data("p", [-1, 2], dtype)
        total, batch, stats = layers.auc(p, y, num_thresholds=50)
        outs = [layers.accuracy(x, y), layers.accuracy(x, y, k=3), layers.accuracy(x, y, k=5),
                layers.precision(x, y, pos_label=2), layers.recall(x, y, "macro"), total, batch]
    return main, startup, outs, stats


def _feed(rows: int, dtype: str, label_dtype: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, (rows, 5)).astype(dtype)  # ties in most rows
    p = rng.choice([0.0, 0.1, 0.5, 0.52, 1.0], rows)
    return {"x": x, "y": rng.integers(0, 5, (rows, 1)).astype(label_dtype),
            "p": np.stack([1 - p, p], 1).astype(dtype)}


@pytest.mark.parametrize("dtype, label_dtype", [("float32", "int64"), ("float64", "int32")])
@pytest.mark.parametrize("rows", [9, 0])
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")  # the re-import's 0 / 0 of an empty batch
def test_metrics_export_to_onnx_and_come_back_as_ordinary_ops(dtype, label_dtype, rows):
    require("onnx")
    from gradgen.framework import export_onnx, import_onnx

    main, startup, outs, stats = _program(dtype, label_dtype)
    assert sorted({op.type for op in main.global_block().ops}) == sorted(METRIC_OPS)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(12, dtype, label_dtype, 1), fetch_list=outs, scope=scope)  # counts from a first run
    before = {s.name: np.array(scope[s.name]) for s in stats}
    feed = _feed(rows, dtype, label_dtype, 2)
    want = exe.run(main, feed=feed, fetch_list=outs + stats, scope=scope)

    model = export_onnx(main, params=before, fetch_list=outs + stats, include_updates=False)
    for (name, got), w in zip(run_ort(model, feed).items(), want):
        assert_close(got, w, f"ONNX Runtime: {name}")

    program, params, outputs = import_onnx(model)
    types = {op.type for op in program.global_block().ops}
    assert not types & set(METRIC_OPS) and {"top_k", "argmax", "take_along_axis_grad", "cumsum"} <= types, types
    imported = Scope()
    for name, value in params.items():
        imported.set(name, value)
    # outputs in fetch order; an updated counter's output is renamed (its own name is the initializer's)
    got = Executor().run(program, feed=feed, fetch_list=list(outputs.values()), scope=imported)
    for v, g, w in zip(outs + stats, got, want):
        assert_close(g, w, f"re-imported: {v.name}")
