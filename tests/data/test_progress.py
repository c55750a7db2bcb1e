"""One progress bar for a whole training run, with the latest loss beside it, on a terminal only (issue 34,
item 6: the loader drew one bar per epoch and they piled up)."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from gradgen.framework import DataLoader
from gradgen.framework.data import DataError


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, so tqdm draws."""

    def isatty(self) -> bool:
        return True


def _on_a_terminal(monkeypatch) -> Terminal:
    """stderr as a terminal, set in the test itself (pytest puts its own capture back between a fixture and
    the test)."""
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    return screen


def _loader() -> DataLoader:
    return DataLoader({"x": np.arange(10.0)}, batch_size=4, shuffle=True, seed=0)


def test_a_run_of_epochs_draws_one_bar_with_the_latest_loss(monkeypatch):
    terminal = _on_a_terminal(monkeypatch)
    loader = _loader()
    seen = []
    for feed in loader.epochs(3):
        seen.append((loader.epoch, len(feed["x"])))
        loader.show(loss=np.float32(0.5) / (1 + loader.epoch))
    assert seen == [(e, n) for e in range(3) for n in (4, 4, 2)]
    screen = terminal.getvalue()
    assert screen.count("\n") == 1, screen  # one bar, left on the screen once the run ends
    last = screen.rsplit("\r", 1)[-1]
    assert "epoch 3/3" in last and "9/9" in last and "loss=0.167" in last, last


def test_passes_in_a_loop_of_the_callers_own_do_not_pile_up(monkeypatch):
    terminal = _on_a_terminal(monkeypatch)
    loader = _loader()
    for _ in range(3):
        assert sum(len(feed["x"]) for feed in loader) == 10
    screen = terminal.getvalue()
    assert "0/3 [" in screen and screen.count("\n") == 0, screen  # drawn, and each pass clears its bar


def test_no_bar_off_a_terminal_or_when_turned_off(capsys, monkeypatch):
    for feed in _loader().epochs(2):
        pass
    assert capsys.readouterr().err == ""
    screen = _on_a_terminal(monkeypatch)
    loader = DataLoader({"x": np.arange(4.0)}, batch_size=2, progress=False)
    for feed in loader.epochs(2):
        loader.show(loss=1.0)
    assert screen.getvalue() == ""


def test_show_takes_numbers_and_epochs_a_count():
    loader = _loader()
    with pytest.raises(DataError, match=r"takes one number \(a fetched loss\), got shape \(2,\)"):
        loader.show(loss=np.zeros(2))
    with pytest.raises(DataError, match="epochs must be >= 0"):
        loader.epochs(-1)
    assert list(loader.epochs(0)) == []
