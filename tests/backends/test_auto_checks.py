"""``Executor(backend="auto")``'s checks of a choice (stand-in runners and a fake clock): when a check comes, how it
pools its blocks, and when the runner-up takes over, after a clear choice and after a close call."""
from __future__ import annotations

import itertools

import pytest

from gradgen.framework.runtime import trial_rules
from gradgen.framework.runtime.trial_rules import (BLOCK_RUNS, NUMPY_FIRST, RECHECK_SECONDS,
                                             RECHECK_SECONDS_OVERLAPPING, RECHECK_TURNS, first_check_after)
from tests.backends.test_auto import INLINE_WARM, _auto, _noisy, _program, _runs, blocks


@pytest.fixture(autouse=True)
def _trial_from_the_third_run(monkeypatch):
    """As in ``test_auto``: the trials start at the third run, run whole blocks, and blocks of ``BLOCK_RUNS``."""
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.0)
    monkeypatch.setattr(trial_rules, "CUT_RATIO", float("inf"))
    monkeypatch.setattr(trial_rules, "BLOCK_SECONDS", 0.0)


def _chosen_after_its_trial(numpy_cost: float, compiled_cost: float):
    """An auto runner whose trial of one program is over (the blocks of one round with these costs)."""
    runner, log, told = _auto(numpy_cost, compiled_cost)
    program = _program()
    _runs(runner, program, NUMPY_FIRST + INLINE_WARM + len(blocks([("xla", compiled_cost), ("numpy", numpy_cost)],
                                                                   after="xla")))
    assert len(told) == 1
    return runner, log, told, program


def test_a_choice_a_burst_of_other_work_spoiled_is_put_right_by_its_check():
    runner, log, told, program = _chosen_after_its_trial(0.5, 1.0)  # xla slowed by another process's burst
    assert told[0][0] == "numpy"
    runner.runners["xla"].cost = 0.25  # the burst is over: xla is the faster (costs exact in binary: the fake
    # clock's differences are then exact too)
    before = len(log)
    _runs(runner, program, round(RECHECK_SECONDS / 0.5))  # the choice's runs until its check is due
    assert set(log[before:]) == {"numpy"}
    check = blocks([("xla", 0.25), ("numpy", 0.5)] * RECHECK_TURNS, after="numpy", first=False)
    _runs(runner, program, len(check) + 3)
    assert log[-len(check) - 3:-3] == check and log[-3:] == ["xla"] * 3
    assert len(told) == 2 and told[1][0] == "xla" and "checked again after 20 s of runs on numpy" in told[1][1]


def test_a_check_that_keeps_the_choice_waits_twice_as_long_for_the_next():
    runner, log, told, program = _chosen_after_its_trial(1.0, 0.25)
    assert told[0][0] == "xla"
    check = blocks([("numpy", 1.0), ("xla", 0.25)] * RECHECK_TURNS, after="xla", first=False)
    for wait in (RECHECK_SECONDS, 2 * RECHECK_SECONDS):
        before = len(log)
        _runs(runner, program, round(wait / 0.25) + len(check))
        assert log[before:] == ["xla"] * round(wait / 0.25) + check
    assert [backend for backend, _ in told] == ["xla"] * 3  # kept, each check's medians told
    assert told[2][1].startswith(told[0][1] + "; checked again after 40 s of runs on xla: median run numpy 1e+03 ms")
    assert told[2][1].endswith("(kept)") and told[2][1].count("checked again") == 1


def test_a_check_pools_blocks_in_turns_so_one_lucky_block_does_not_move_the_choice():
    """The runner-up's first block of a check runs fast (the choice's engine had other work beside it then); its
    second does not: pooled, the choice stays. A check of one block each would have moved it."""
    runner, log, told, program = _chosen_after_its_trial(1.0, 0.25)
    assert told[0][0] == "xla"
    _runs(runner, program, round(RECHECK_SECONDS / 0.25))  # the choice's runs until its check is due
    runner.runners["numpy"].cost = 0.125
    _runs(runner, program, 1)
    assert log[-1] == "numpy"  # the check's first block
    while log[-1] == "numpy":
        _runs(runner, program, 1)
    runner.runners["numpy"].cost = 1.0  # from its second block on, numpy is as slow as it was
    check_left = blocks([("numpy", 1.0), ("xla", 0.25)] * (RECHECK_TURNS - 1), after="xla", first=False)
    _runs(runner, program, len(check_left) + 20)
    assert log[-20:] == ["xla"] * 20 and [backend for backend, _ in told] == ["xla", "xla"]
    assert told[1][1].endswith("(kept)")


def _check_cost(runner_up: float, slower_by: float) -> float:
    """What a check's runs on the runner-up cost beyond the choice's: settling and a block, per turn."""
    per_turn = trial_rules.SETTLE_SECONDS + max(trial_rules.BLOCK_SECONDS, BLOCK_RUNS * runner_up)
    return RECHECK_TURNS * per_turn * slower_by


def test_the_first_check_waits_as_long_as_its_cost_allows():
    # two turns of settling and a block on an engine 50 % slower: CHECK_SHARE of the wait
    wait = _check_cost(0.012, 0.5) / trial_rules.CHECK_SHARE
    assert RECHECK_SECONDS_OVERLAPPING < wait < RECHECK_SECONDS
    assert first_check_after(0.008, 0.012, clear=True) == pytest.approx(wait)
    assert first_check_after(0.18, 0.33, clear=True) == RECHECK_SECONDS  # ResNet-like steps: the longest wait
    assert first_check_after(0.0005, 0.00051, clear=True) == RECHECK_SECONDS_OVERLAPPING  # the shortest
    assert first_check_after(0.008, 0.010, clear=False) == RECHECK_SECONDS_OVERLAPPING  # a close call


def test_a_clear_choice_between_close_short_steps_is_checked_within_seconds():
    runner, log, told = _auto(0.012, 0.008)  # apart (constant times), xla a third faster
    program = _program()
    while not told:
        _runs(runner, program, 1)
    assert told[0][0] == "xla" and "apart" in told[0][1]
    wait = _check_cost(0.012, 0.5) / trial_rules.CHECK_SHARE
    before = len(log)
    _runs(runner, program, int(wait / 0.008) - 1)
    assert set(log[before:]) == {"xla"}
    _runs(runner, program, 3)
    assert log[-1] == "numpy"  # the check began after a few seconds of runs, not RECHECK_SECONDS


def _overlapping_choice(monkeypatch, numpy_cycle=(0.9, 1.1, 1.0)):
    """A trial whose times never separate (xla's cycle through 1.1, 0.9, 1.0; numpy's ``numpy_cycle``), run until it
    chooses (after MAX_ROUNDS): (runner, log, told, program, the choice, the runner-up)."""
    monkeypatch.setattr(trial_rules, "TRIAL_SECONDS", 1e9)
    runner, log, told = _auto(0.0, 0.0)
    for name, cycle in (("numpy", list(numpy_cycle)), ("xla", [1.1, 0.9, 1.0])):
        runner.runners[name].run = _noisy(runner.runners[name], itertools.cycle(cycle))
    program = _program()
    while not told:
        _runs(runner, program, 1)
    return runner, log, told, program, told[0][0], {"numpy": "xla", "xla": "numpy"}[told[0][0]]


def test_a_choice_made_while_the_times_overlap_is_checked_again_soon(monkeypatch):
    """A trial that ends with the times still overlapping (after MAX_ROUNDS) made a close call: its first check
    comes after RECHECK_SECONDS_OVERLAPPING of runs on the choice, not RECHECK_SECONDS."""
    runner, log, told, program, chosen, other = _overlapping_choice(monkeypatch)
    assert "overlapping" in told[0][1]
    assert RECHECK_SECONDS_OVERLAPPING <= 2.0 < RECHECK_SECONDS
    before = len(log)
    _runs(runner, program, 4)  # about 4 s of runs on the choice: its check is due
    assert log[before:before + 2] == [chosen] * 2 and other in log[before:]


def _after_an_overlapping_choice(monkeypatch, chosen_cycle, other_cycle, numpy_cycle=(0.9, 1.1, 1.0)):
    """A choice made on overlapping times (``_overlapping_choice``), then the runs' times as the cycles say: (the
    choice, the runner-up, the told choices after its first check)."""
    runner, log, told, program, chosen, other = _overlapping_choice(monkeypatch, numpy_cycle)
    runner.runners[chosen].run = _noisy(runner.runners[chosen], itertools.cycle(chosen_cycle))
    runner.runners[other].run = _noisy(runner.runners[other], itertools.cycle(other_cycle))
    _runs(runner, program, 40)
    return chosen, other, told


def test_a_close_call_is_put_right_by_a_check_whose_medians_differ_though_its_times_overlap(monkeypatch):
    """The check's pooled times overlap (the runner-up's upper quartile 1.15 over the choice's lower 0.9), but
    its median is 20 % below: a choice made on overlapping times weighs no more than that."""
    chosen, other, told = _after_an_overlapping_choice(monkeypatch, [0.9, 1.0, 1.1], [0.6, 0.8, 1.15])
    assert told[-1][0] == other and "(overlapping)" in told[-1][1] and "checked again" in told[-1][1]


def test_a_close_call_goes_where_its_check_points(monkeypatch):
    """``trial_rules.check_overturns`` after a close call: a check whose runner-up runs 5 % faster (0.95 against 1.0,
    within ``RECHECK_MARGIN``, times overlapping) overturns the choice, also after a trial that measured the choice
    5 % ahead (numpy at 0.95 against xla's 1.0, overlapping: the trial's first seconds are the biased ones; a seed
    f64 trial's numpy at 1.03 ms against xla's 0.895 kept xla after a check met numpy at 0.773 and xla at 0.817,
    and xla then ran 12 % slower). A check whose runner-up runs 3 % slower keeps it, and so do ones whose runner-up
    runs 1 % or 3 % faster: ties (``RECHECK_TIE``; a seed f64 check's 2.8 % lead had moved the choice to xla, which
    then ran 17 % slower)."""
    check = ([0.9, 1.0, 1.1], [0.86, 0.95, 1.05])
    chosen, other, told = _after_an_overlapping_choice(monkeypatch, *check)
    assert len(told) >= 2 and told[1][0] == other and "checked again" in told[1][1] and "(kept)" not in told[1][1]
    chosen, other, told = _after_an_overlapping_choice(monkeypatch, *check, numpy_cycle=(0.85, 1.05, 0.95))
    assert chosen == "numpy" and "overlapping" in told[0][1] and "numpy 950 ms, xla 1e+03 ms" in told[0][1]
    assert told[1][0] == other and "checked again" in told[1][1] and "(kept)" not in told[1][1]
    for slower in ([0.93, 1.03, 1.13], [0.89, 0.99, 1.09], [0.87, 0.97, 1.07]):
        chosen, other, told = _after_an_overlapping_choice(monkeypatch, [0.9, 1.0, 1.1], slower)
        assert len(told) >= 2 and told[1][0] == chosen and told[1][1].endswith("(kept)")


def test_a_close_call_is_overturned_by_a_check_apart_whatever_the_trial_measured(monkeypatch):
    """A close call whose trial measured the runner-up well behind (numpy's median 1.38 against xla's 1.0, the times
    overlapping: numpy's fast runs among xla's) meets a check whose times lie apart, numpy 20 % ahead (0.8 against
    1.0): numpy takes over, as it would after a clear choice. The two ratios together (1.38 x 0.8 = 1.10) do not put
    numpy ahead, which kept the slower engine before."""
    chosen, other, told = _after_an_overlapping_choice(monkeypatch, [1.0], [0.8], numpy_cycle=(0.95, 1.38, 1.6))
    assert chosen == "xla" and "overlapping" in told[0][1] and "numpy 1.38e+03 ms, xla 1e+03 ms" in told[0][1]
    assert told[1][0] == "numpy" and "checked again" in told[1][1] and "(apart)" in told[1][1]


def _after_a_clear_choice(numpy_check_cycle):
    """A trial that chose xla on times apart (numpy 0.625 a run, xla 0.4: the runner-up's median over the choice's
    1.56, over ``PART_RATIO``: apart after one block each), then a check of noisy runs: xla cycling through 0.3,
    1.0, 1.1 (median 1.0), numpy through ``numpy_check_cycle``. The choices told."""
    runner, log, told, program = _chosen_after_its_trial(0.625, 0.4)
    assert told[0][0] == "xla" and "(apart)" in told[0][1]
    runner.runners["xla"].run = _noisy(runner.runners["xla"], itertools.cycle([0.3, 1.0, 1.1]))
    runner.runners["numpy"].run = _noisy(runner.runners["numpy"], itertools.cycle(numpy_check_cycle))
    _runs(runner, program, round(RECHECK_SECONDS / 0.8) + 30)
    return told


def test_a_clear_choice_goes_where_the_trial_and_a_far_check_together_point():
    """``trial_rules.check_overturns`` after a clear choice: the check's times overlap (numpy's upper quartile over
    xla's lower: xla's 0.3 runs), so the check alone does not overturn a choice made apart; but its median puts
    numpy at half xla's, and with the trial's 1.56 for xla the two together put numpy 22 % ahead: numpy takes over.
    A check that puts numpy only 20 % ahead (together xla 25 % ahead) keeps xla."""
    told = _after_a_clear_choice([0.4, 0.5, 0.6])
    assert [backend for backend, _ in told][:2] == ["xla", "numpy"] and "(overlapping)" in told[1][1]
    told = _after_a_clear_choice([0.7, 0.8, 0.9])
    assert [backend for backend, _ in told][:2] == ["xla", "xla"] and told[1][1].endswith("(kept)")


def test_times_apart_after_one_block_each_take_a_second_round_unless_far_apart():
    """One block each is one moment each (``trial_rules.BLOCKS_TO_PART``): numpy at 0.0625 s a run against xla's 0.05
    (1.25x, under ``PART_RATIO``), apart, is no choice after the first round; the second round, in turns, makes it.
    At 0.1 against 0.05 (2x) the first round does."""
    for numpy_cost, runs_each in ((0.0625, 6), (0.1, 3)):
        runner, log, told = _auto(numpy_cost, 0.05)
        program = _program()
        for _ in range(80):
            _runs(runner, program, 1)
            if told:
                break
        assert told and told[0][0] == "xla", (numpy_cost, told)
        assert f"median run over {runs_each} runs each (apart)" in told[0][1], (numpy_cost, told)
