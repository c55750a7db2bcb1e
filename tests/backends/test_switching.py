"""The switch interval while a background preparation runs (``backend/shared/switching.py``): lowered for the
preparation, given back when the last one ends, and the user's own setting left alone."""
from __future__ import annotations

import sys

import pytest

from gradgen.framework.backend.shared.switching import BACKGROUND_SWITCH_SECONDS, prompt_switching


@pytest.fixture(autouse=True)
def default_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


def test_the_interval_is_short_while_preparations_run_and_comes_back_after_the_last():
    with prompt_switching():
        assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
        with prompt_switching():
            assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
        assert sys.getswitchinterval() == pytest.approx(BACKGROUND_SWITCH_SECONDS)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_failed_preparation_gives_the_interval_back():
    with pytest.raises(MemoryError):
        with prompt_switching():
            raise MemoryError("no room to compile")
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_an_interval_the_user_set_meanwhile_stays():
    with prompt_switching():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_shorter_interval_the_process_had_is_kept():
    sys.setswitchinterval(0.0001)
    with prompt_switching():
        assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.02)
    assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.02)
