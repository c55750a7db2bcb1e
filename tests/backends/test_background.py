"""What changes while a background preparation runs (``backend/shared/background.py``): the switch interval,
lowered for the preparation, given back when the last one ends, and the user's own setting left alone; and the
cores the runs' pools take (``cores.cores_for_runs``), one fewer per preparation."""
from __future__ import annotations

import sys

import pytest

from gradgen.framework.backend.shared import cores
from gradgen.framework.backend.shared.background import (BACKGROUND_SWITCH_SECONDS, background_preparation,
                                                         preparations)


@pytest.fixture(autouse=True)
def default_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


def test_the_interval_is_short_while_preparations_run_and_comes_back_after_the_last():
    with background_preparation():
        assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
        with background_preparation():
            assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
        assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_failed_preparation_gives_the_interval_back():
    with pytest.raises(MemoryError):
        with background_preparation():
            raise MemoryError("no room to compile")
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_an_interval_the_user_set_meanwhile_stays():
    with background_preparation():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_shorter_interval_the_process_had_is_kept():
    sys.setswitchinterval(0.0001)
    with background_preparation():
        assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.02)
    assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.02)


def test_each_preparation_takes_a_core_from_the_runs_beside_it(monkeypatch):
    monkeypatch.setattr(cores, "free_cores", lambda: 3)
    assert preparations() == 0 and cores.cores_for_runs() == 3
    with background_preparation():
        assert preparations() == 1 and cores.cores_for_runs() == 2
        with background_preparation():
            assert cores.cores_for_runs() == 1
            with background_preparation():
                assert cores.cores_for_runs() == 1  # at least one
    assert preparations() == 0 and cores.cores_for_runs() == 3
    with pytest.raises(MemoryError):
        with background_preparation():
            raise MemoryError("no room to compile")
    assert preparations() == 0
