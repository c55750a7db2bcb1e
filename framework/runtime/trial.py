"""The trial of ``backend="auto"`` (``auto_run.py`` tells the whole story): where the runs of one program version,
names and feed shapes go while the engines are weighed, when the choice is made, and when it is checked again;
plain bookkeeping over the run times the runner reports, by the thresholds of ``trial_rules.py``."""
from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from typing import Mapping, Sequence

from . import trial_rules as rules
from .remembered import Remembered

__all__ = ["Trial"]


class Trial:
    """Where the runs of one program version, names and feed shapes go: the next backend, the times so far, the
    choice. ``candidates`` are the compiled backends in the trial beside numpy (``background[name]``: whether its
    step is prepared in a background thread, else its first run prepares it, untimed); a candidate whose compile
    fails, or that cannot run the program, leaves the trial (``dropped``), and with none left numpy is chosen.

    ``remembered``: the choice an earlier process made for the same program (``remembered.py``). Then only that
    engine prepares, after ``NUMPY_FIRST`` runs (the earlier process ran long enough to choose), or before the
    first run when its preparation was short (``prepare_first``), and is chosen as soon as it is ready, with no
    timed runs; the runner-up prepares later, for the first check, which weighs the two as after a trial. If the
    remembered engine fails to prepare, the others prepare and the trial runs as usual. ``record_key``: where the
    runner files this trial's choice for later processes (None: nowhere)."""

    def __init__(self, candidates: Sequence[str], stays_because: str | None = None,
                 background: Mapping[str, bool] | bool = False, remembered: Remembered | None = None,
                 record_key: str | None = None):
        self.candidates = [] if stays_because else list(candidates)
        self.chosen: str | None = "numpy" if stays_because else None
        self.reason = stays_because or ""
        self.numpy_left = rules.NUMPY_FIRST
        self.numpy_seconds = 0.0
        """Run time spent on numpy before the trial: the compiles start only after ``NUMPY_SECONDS_FIRST``."""
        ahead = background if isinstance(background, Mapping) else {name: background for name in self.candidates}
        self.compile: dict[str, str] = {name: "due" if ahead[name] else "inline" for name in self.candidates}
        """Per candidate, how it gets its step: "due" (a background compile is to start), "running", "ready",
        "inline" (its first run compiles, untimed), or "held" (due later: a remembered choice's runner-up, once
        the choice is taken)."""
        self.warm_left = {name: rules.COMPILED_WARM + (0 if ahead[name] else 1) for name in self.candidates}
        self.seconds: dict[str, list[float]] = {"numpy": [], **{name: [] for name in self.candidates}}
        self.blocks: dict[str, int] = dict.fromkeys(self.seconds, 0)
        """backend -> its whole blocks of timed runs so far (a round is a block of each backend in the contest)."""
        self.dropped: dict[str, str] = {}
        """candidate -> why it left the trial."""
        self.cut: dict[str, str] = {}
        """backend -> why it left the contest early: after ``CUT_RUNS`` timed runs (``CUT_RATIO``), or after a round
        whose times put it clearly behind the fastest (``separated``); its times stay in ``seconds``."""
        self._numpy_runs: deque[float] = deque()
        """numpy's last runs before the compiles start, its first (the plan's build) never among them, as many as
        make a whole block (``full_block``): its first block."""
        self._numpy_sum = 0.0
        self._looks: dict[str, float] = {}
        """backend -> a first guess at its run time (a candidate's warm run, numpy's runs): the order of a round."""
        self._spent = 0.0
        self._block: str | None = None
        """The backend of the trial's current block of timed runs."""
        self._block_timed = 0
        self._block_spent = 0.0
        """The current block's timed runs and their time: whether it is whole (``full_block``)."""
        self._settled: float | None = None
        """Settling the current block has had (its untimed runs and the idle time before them), or None when it
        needs none (the run before it was its own backend's) or has had enough."""
        self._last: str | None = None
        """The backend of the last run."""
        self._last_ended: float | None = None
        """When the last run ended, by the runner's clock (None: not told): the idle time before the next."""
        self._lock = threading.Lock()
        """Background compiles report while the runs go on."""
        self.told = False
        """Whether the executor has heard of the choice (a background compile may make it between runs)."""
        self.runner_up: str | None = None
        """The second fastest in the trial: what a check of the choice runs against (None: nothing to check)."""
        self.rechecks = 0
        self._recheck_after = rules.RECHECK_SECONDS
        self._on_choice = 0.0
        """Run time on the choice since it was made or last checked."""
        self._recheck: dict[str, list[float]] | None = None
        """While a check runs: each engine's timed runs in it (its blocks pooled)."""
        self._turns: list[str] = []
        """While a check runs: the engines of its blocks still to run, the present one first."""
        self._chosen_because = ""
        """Why the present choice was made (the trial's medians, or the check that switched to it): the reason a
        check that keeps the choice adds its own medians to."""
        self._chosen_apart = True
        """Whether the present choice was made on times apart from the runner-up's (a check then needs the runner-up
        ``RECHECK_MARGIN`` ahead; a choice made on overlapping times, any lead in the check:
        ``trial_rules.check_overturns``)."""
        self._medians: dict[str, float] = {}
        """The latest median run of each engine timed (the trial's, then each check's): what a record keeps."""
        self._measured = ""
        """What the latest trial or check found, without what an earlier process found: a record's reason."""
        self.record_due = False
        """Whether a choice or a check has happened that no record holds yet (the runner files one)."""
        self.record_key = record_key
        """The key the runner files this trial's records under, or None when it keeps none."""
        self.recalled: Remembered | None = None
        """The earlier process's choice, while this trial waits to take it (None once taken or given up)."""
        self.prepare_seconds: dict[str, float] = {}
        """candidate -> how long its preparation took in this process."""
        self._prepare_later: dict[str, float] = {}
        """candidate -> how long its preparation should take in a later process (what a record keeps of the
        choice's): what this one would take alone (``PreparationClock``: beside a trial's runs LeNet's torch
        preparation took 3.9-5.4 s, alone 2.2), less the compiles a persistent cache keeps (a 4,010-op
        chain's xla preparation, over ``RECALLED_WAIT_SECONDS`` with its compiles, was recorded as 2.1 s, and the
        next process waited for it at its first run instead of importing jax beside its runs)."""
        self._when: float | None = None
        """When the measurement behind the present choice was made, if in an earlier process (its record's)."""
        if remembered is not None and self.chosen is None:
            self._recall(remembered)

    def _recall(self, remembered: Remembered) -> None:
        """Hold every preparation but the remembered engine's; take a remembered numpy at once."""
        self.recalled = remembered
        for name, state in self.compile.items():
            if state == "due" and name != remembered.chosen:
                self.compile[name] = "held"
        if remembered.chosen == "numpy":
            self._take_recalled()

    def _take_recalled(self) -> None:
        """Run on the remembered engine from now on. Its first check waits ``RECHECK_SECONDS_REMEMBERED``: a trial
        or a check weighed the two already, and checking sooner would spend the first seconds the record is kept
        to save (on the anchors' LeNet, the runner-up's compile and the check's blocks slowed the steps after the
        choice to 14-23 ms against 9-11). The runner-up prepares halfway to it."""
        remembered, self.recalled = self.recalled, None
        self.chosen, self._chosen_apart = remembered.chosen, remembered.apart
        self.reason = self._chosen_because = remembered.says()
        self._medians, self._measured, self._when = dict(remembered.medians), remembered.reason, remembered.when
        self.record_due = self.chosen in self.prepare_seconds  # (the record learns this preparation's time)
        if self._last is None and self.chosen in self.prepare_seconds:  # (taken in the first run)
            self.reason += f"; prepared before the first run, in {self.prepare_seconds[self.chosen]:.2g} s"
        up = remembered.runner_up
        self.runner_up = up if up == "numpy" or up in self.candidates else None
        self._recheck_after = rules.RECHECK_SECONDS_REMEMBERED

    def _give_up_recall(self) -> None:
        """The remembered engine cannot run: every candidate prepares, and the trial runs as usual."""
        self.recalled = None
        for name, state in self.compile.items():
            if state == "held":
                self.compile[name] = "due"

    def _prepared(self, name: str) -> bool:
        """Whether ``name`` can run now without a background preparation still to finish."""
        return name == "numpy" or self.compile.get(name) in ("ready", "inline")

    def prepare_first(self) -> tuple[str, float] | None:
        """The remembered engine and the longest its preparation is waited for, now marked running (the caller
        prepares it and waits), when it prepares before the first run: its record's preparation took at most
        ``RECALLED_WAIT_SECONDS``. Else None (and always after the first run)."""
        if self.recalled is None or self._last is not None:
            return None
        with self._lock:
            recalled = self.recalled
            took = None if recalled is None else recalled.prepare_seconds
            if took is None or took > rules.RECALLED_WAIT_SECONDS or self.compile.get(recalled.chosen) != "due":
                return None
            self.compile[recalled.chosen] = "running"
            self.numpy_left = 0
            return recalled.chosen, rules.recalled_wait(took)

    def start_due(self) -> list[str]:
        """The candidates whose background compile is due, now marked running (the caller starts them): none
        while numpy's first runs last. Asked before every run, so the usual answer (none) takes no lock."""
        if self.numpy_left or "due" not in self.compile.values():
            return []
        with self._lock:
            due = [name for name, state in self.compile.items() if state == "due"]
            for name in due:
                self.compile[name] = "running"
            return due

    def compiling(self) -> bool:
        """Whether a candidate's background compile is yet to start or still running."""
        return any(state in ("due", "running") for state in self.compile.values())

    def next_backend(self) -> str:
        """The backend the next run goes to: numpy first and while any compile runs, then each candidate's
        untimed warm runs, then the backend with the fewest timed runs (a candidate before numpy on a tie)."""
        with self._lock:
            if self.chosen is not None:
                return self.chosen if self._recheck is None else self._recheck_block()
            if self.recalled is not None and not self.numpy_left and self._prepared(self.recalled.chosen):
                self._take_recalled()
                return self.chosen
            if self.numpy_left:
                return "numpy"
            compiling = self.compiling()
            warming = next((name for name in self.candidates
                            if self.warm_left[name] and (not compiling or self.compile[name] == "ready")), None)
            if warming is not None:  # (an engine ready while others prepare warms up beside them: untimed)
                return warming
            if compiling:
                return "numpy"
            if self._block in self.seconds and self._block not in self.cut and not self._block_done():
                return self._block
            name = min(self._contenders(), key=lambda n: (self.blocks[n], self._looks.get(n, float("inf"))))
            self._start_block(name, settles=name != self._last or not self.seconds[name])
            return name

    def _start_block(self, name: str, settles: bool) -> None:
        """A block of timed runs on ``name`` begins, after ``SETTLE_SECONDS`` of untimed ones if it ``settles``."""
        self._block, self._block_timed, self._block_spent = name, 0, 0.0
        self._settled = 0.0 if settles else None

    def _timed_in_block(self, seconds: float, idle: float) -> bool:
        """Count a run of the present block, after ``idle`` seconds without one: False while the block is still
        settling (untimed), else True, its time added to the block's."""
        if self._settled is not None:
            self._settled += idle
            if self._settled < rules.SETTLE_SECONDS:
                self._settled += seconds
                return False
            self._settled = None
        self._block_timed += 1
        self._block_spent += seconds
        return True

    def _block_done(self) -> bool:
        """Whether the current block's timed runs make a whole block."""
        return rules.full_block(self._block_timed, self._block_spent)

    def _contenders(self) -> list[str]:
        """The backends still in the contest: numpy and the candidates, less the cut ones."""
        return [name for name in ("numpy", *self.candidates) if name not in self.cut]

    def drop(self, name: str, why: str) -> None:
        """Candidate ``name`` leaves the trial (``why``); numpy is chosen when none is left."""
        with self._lock:
            self._drop(name, why)

    def _drop(self, name: str, why: str) -> None:
        if name not in self.candidates:
            return
        if self.recalled is not None and name == self.recalled.chosen:
            self._give_up_recall()
        if name == self.runner_up and self._recheck is None:
            self.runner_up = None
        self.candidates.remove(name)
        for table in (self.compile, self.warm_left, self.seconds, self.blocks, self.cut):
            table.pop(name, None)
        self.dropped[name] = why
        if not self.candidates and self.chosen is None:
            self.chosen, self.reason = "numpy", "; ".join(self.dropped.values())

    def compiled(self, name: str, why_not: str | None, seconds: float | None = None, kept: float = 0.0,
                 alone: float | None = None) -> None:
        """Candidate ``name``'s background compile finished, after ``seconds`` (None: not timed), of which it would
        have taken ``alone`` with nothing beside it (``PreparationClock``; None: all of them) and ``kept``
        compiling what a persistent cache keeps for later processes: ready, or ``why_not`` (it leaves the
        trial)."""
        with self._lock:
            if why_not is None:
                if name in self.compile:
                    self.compile[name] = "ready"
                if seconds is not None:
                    self.prepare_seconds[name] = seconds
                    self._prepare_later[name] = max(0.0, (seconds if alone is None else alone) - kept)
            else:
                self._drop(name, why_not)

    def _recheck_block(self) -> str:
        """The backend of the check's present block (its first turn still to run), settling if it is new."""
        name = self._turns[0]
        if self._block != name:
            self._start_block(name, settles=name != self._last)
        return name

    def ran(self, backend: str, seconds: float, ended: float | None = None) -> None:
        """A run on ``backend`` succeeded in ``seconds``, ending at ``ended`` by the runner's clock (None: not
        known, no idle time counted): count it, choose once the trial is over, and check the choice again now and
        then."""
        with self._lock:
            idle = self._idle_before(seconds, ended)
            if self.chosen is not None:
                if self.numpy_left and backend == "numpy":  # (a remembered numpy: its runner-up waits as a trial)
                    self._count_first(seconds)
                self._ran_on_choice(backend, seconds, idle)
                self._last = backend
                return
            self._last = backend
            if self.numpy_left:
                self._count_first(seconds)
                return
            if self.warm_left.get(backend):
                self.warm_left[backend] -= 1
                self._looks[backend] = seconds
                return
            if self.compiling() or any(self.warm_left.values()):
                return  # (numpy while a compile runs beside it: slowed by it, not timed)
            if backend != self._block or not self._timed_in_block(seconds, idle):  # (not the trial's, or settling)
                return
            self.seconds[backend].append(seconds)
            self._spent += seconds
            if self._block_timed == rules.CUT_RUNS:
                self._cut_if_far_behind(backend, self.seconds[backend][-rules.CUT_RUNS:])
            done = self._block_done()
            if done:
                self.blocks[backend] += 1
            if done or backend in self.cut:
                self._decide()

    def failed(self, ended: float) -> None:
        """A run failed at ``ended``: it counts for none, and its time is not idle time before the next."""
        with self._lock:
            self._last_ended = ended

    def _idle_before(self, seconds: float, ended: float | None) -> float:
        """The time between the last run's end and the start of this one (``seconds`` long, ending at ``ended``)."""
        last, self._last_ended = self._last_ended, ended
        return 0.0 if last is None or ended is None else max(0.0, ended - seconds - last)

    def _count_first(self, seconds: float) -> None:
        """One of the runs on numpy before the preparations start: the last of them that make a whole block are
        numpy's first."""
        if self.numpy_seconds:  # (not the first run)
            self._numpy_runs.append(seconds)
            self._numpy_sum += seconds
            while rules.full_block(len(self._numpy_runs) - 1, self._numpy_sum - self._numpy_runs[0]):
                self._numpy_sum -= self._numpy_runs.popleft()  # the block is whole without it
        self.numpy_seconds += seconds
        waits = rules.NUMPY_SECONDS_FIRST if self.recalled is None else 0.0  # (a remembered compiled engine: no wait)
        if self.numpy_left > 1 or self.numpy_seconds >= waits:
            self.numpy_left -= 1
        if not self.numpy_left:
            self._numpy_block()

    def _numpy_block(self) -> None:
        """numpy's last runs before the compiles give a first guess at its time, and its first timed block if they
        make a whole one."""
        if self._numpy_runs:
            self._looks["numpy"] = statistics.median(self._numpy_runs)
        if rules.full_block(len(self._numpy_runs), self._numpy_sum):
            self.seconds["numpy"] = list(self._numpy_runs)
            self.blocks["numpy"] = 1
            self._spent += sum(self._numpy_runs)

    def _cut_if_far_behind(self, backend: str, runs: list[float]) -> None:
        """``backend`` leaves the contest if each of its block's first timed ``runs`` (``CUT_RUNS``) is over
        ``CUT_RATIO`` times the slowest run of the fastest complete block."""
        complete = [name for name in self._contenders() if name != backend and self.blocks[name]]
        if not complete:
            return
        best = min(complete, key=lambda name: statistics.median(self.seconds[name]))
        slowest = max(self.seconds[best])
        if min(runs) > rules.CUT_RATIO * slowest:
            self.cut[backend] = (f"{backend} left after {len(runs)} runs of {min(runs) * 1e3:.3g} ms or more, over "
                                 f"{rules.CUT_RATIO:g}x {best}'s slowest ({slowest * 1e3:.3g} ms)")

    def _ran_on_choice(self, backend: str, seconds: float, idle: float) -> None:
        if self.runner_up is None:
            return
        if self._recheck is None:
            self._on_choice += seconds
            if self.compile.get(self.runner_up) == "held" and self._on_choice >= self._recheck_after / 2:
                self.compile[self.runner_up] = "due"  # (a remembered choice's runner-up: ready before its check)
            if self._on_choice >= self._recheck_after and self._prepared(self.runner_up):
                self._recheck = {self.runner_up: [], self.chosen: []}
                self._turns = [self.runner_up, self.chosen] * rules.RECHECK_TURNS
                self._block = None
            return
        if backend != self._block or not self._timed_in_block(seconds, idle):
            return
        self._recheck[backend].append(seconds)
        if self._block_done():
            self._turns.pop(0)
            self._block = None
            if not self._turns:
                self._rechecked()

    def _rechecked(self) -> None:
        """All blocks of a check are in: the runner-up takes over if clearly faster in the check or on all that was
        measured (after a close call, faster at all on all that was measured); the next check waits. Either way the
        choice's reason gives the check's medians, and the executor hears it."""
        other, choice, times = self.runner_up, self.chosen, self._recheck
        self._recheck, self._block, self._on_choice, self._when = None, None, 0.0, None
        self.rechecks += 1
        faster, slower = statistics.median(times[other]), statistics.median(times[choice])
        measured = (f"checked again after {self._recheck_after:g} s of runs on {choice}: median run "
                    f"{other} {faster * 1e3:.3g} ms, {choice} {slower * 1e3:.3g} ms")
        self.told, self.record_due = False, True
        before = (self._medians[other] / self._medians[choice]
                  if self._medians.get(other) and self._medians.get(choice) else None)
        self._medians.update({other: faster, choice: slower})
        apart = rules.separated(times[other], times[choice])
        if rules.check_overturns(before, faster / slower, apart, close_call=not self._chosen_apart):
            self.reason = self._chosen_because = self._measured = f"{measured} ({'apart' if apart else 'overlapping'})"
            self.chosen, self.runner_up, self._chosen_apart = other, choice, apart
            self._recheck_after = rules.RECHECK_SECONDS
        else:
            self.reason = f"{self._chosen_because}; {measured} (kept)"
            self._measured = f"{measured} (kept)"
            self._recheck_after = min(2 * self._recheck_after, rules.RECHECK_MAX_SECONDS)

    def _decide(self) -> None:
        """After a block: once every backend in the contest has as many whole blocks as the others, those clearly
        behind the fastest (times apart, ``rules.parted``) leave, and the fastest is chosen when none is left close
        to it, or the trial is long enough."""
        names = self._contenders()
        if len({self.blocks[name] for name in names}) != 1:
            return
        rounds = min(len(self.seconds[name]) for name in names)
        if rounds < rules.MIN_ROUNDS:
            return
        medians = {name: statistics.median(self.seconds[name]) for name in names}
        fast, *others = sorted(names, key=lambda name: (medians[name], name != "numpy"))
        apart = [name for name in others if rules.separated(self.seconds[fast], self.seconds[name])
                 and rules.parted(self.blocks[fast], medians[fast], medians[name])]
        clear = len(apart) == len(others)
        if not clear:  # the ones still close to the fastest go on alone
            for name in apart:
                others.remove(name)
                self.cut[name] = (f"{name} left after {len(self.seconds[name])} runs (median "
                                  f"{medians[name] * 1e3:.3g} ms), apart from {fast}'s")
        if not (clear or rounds >= rules.MAX_ROUNDS or self._spent >= rules.TRIAL_SECONDS):
            return
        behind = sorted(self.cut, key=lambda name: statistics.median(self.seconds[name]))
        self.chosen, self.runner_up = fast, [*others, *behind][0] if others or behind else None
        self._chosen_apart, self.record_due = clear, True
        self._medians = {name: statistics.median(times) for name, times in self.seconds.items() if times}
        if self.runner_up is not None:
            runner_up = statistics.median(self.seconds[self.runner_up])
            self._recheck_after = rules.first_check_after(medians[fast], runner_up, clear)
        shown = ", ".join(f"{name} {medians[name] * 1e3:.3g} ms" for name in medians)
        how = "apart" if clear else "overlapping"
        left = "".join(f"; {why}" for why in [*self.cut.values(), *self.dropped.values()])
        runs = f"{rounds} runs each" if len({len(self.seconds[n]) for n in names}) == 1 else f"{rounds}+ runs each"
        self.reason = self._chosen_because = self._measured = f"median run over {runs} ({how}): {shown}{left}"

    def record(self) -> Remembered:
        """The choice as a record for later processes (``remembered.py``)."""
        with self._lock:
            return Remembered(chosen=self.chosen, runner_up=self.runner_up, medians=dict(self._medians),
                              apart=self._chosen_apart, reason=self._measured, when=self._when or time.time(),
                              prepare_seconds=self._prepare_later.get(self.chosen))
