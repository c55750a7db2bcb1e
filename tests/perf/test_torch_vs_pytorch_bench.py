"""``tests.bench.torch_vs_pytorch --aten``: its per-operator comparison counts each step's ATen calls and times."""
from __future__ import annotations

from tests.backends.test_torch_backend import need_torch


def test_the_aten_comparison_counts_each_steps_calls_and_lists_the_largest_difference_first(capsys):
    need_torch()
    import torch

    from tests.bench.torch_vs_pytorch import _aten_times, _print_aten

    x = torch.ones(256, 256)
    wall, ours = _aten_times(lambda: torch.mm(x, x) + x, 4)
    _, theirs = _aten_times(lambda: x + x, 4)
    assert wall > 0
    assert ours["aten::mm"][1] == 1.0 and ours["aten::add"][1] == 1.0 and "aten::mm" not in theirs
    assert ours["aten::mm"][0] > 0
    _print_aten((wall, ours), (wall, theirs))
    lines = capsys.readouterr().out.splitlines()
    biggest = max(set(ours) | set(theirs),
                  key=lambda k: abs(ours.get(k, (0, 0))[0] - theirs.get(k, (0, 0))[0]))
    assert lines[1].split()[0] == biggest
    assert lines[-2].startswith("all ATen operators") and lines[-1].startswith("wall, under the profiler")
