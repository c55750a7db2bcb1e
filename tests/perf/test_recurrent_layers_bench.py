"""``tests.bench.recurrent_layers``: a table of the layer's step on the default, the engines asked for and PyTorch,
each against PyTorch's; an engine that cannot run the layer is said, not timed. ``cases.block_medians`` takes its
blocks in turn."""
from __future__ import annotations

from tests.backends.test_torch_backend import need_torch


def test_the_table_has_a_row_per_system_against_pytorch_and_names_an_engine_that_cannot_run_the_layer(capsys):
    need_torch()
    from tests.bench.recurrent_layers import main

    main(["--cell", "lstm", "--dtype", "float64", "--steps", "3", "--batch", "2", "--inputs", "3", "--hidden", "4",
          "--settle", "0.2", "--engines", "numpy,torch,nosuch", "--warm", "1", "--rounds", "1", "--block", "1"])
    out = capsys.readouterr().out
    assert "gradgen@nosuch: ExecutionError: unknown backend 'nosuch'" in out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert set(rows) == {"system", "gradgen", "gradgen@numpy", "gradgen@torch", "pytorch"}  # (float64 step by step)
    assert rows["pytorch"].rstrip().endswith("| 1.00 |")


def test_block_medians_times_each_side_in_turn():
    from tests.bench.cases import block_medians

    order = []
    steps = {name: (lambda name=name: order.append(name)) for name in ("a", "b")}
    medians = block_medians(steps, rounds=3, block=2, warmup=1)
    assert order == ["a", "b"] + ["a", "a", "b", "b"] * 3
    assert set(medians) == {"a", "b"} and all(ms > 0 for ms in medians.values())
