"""Executor.run under interrupts, threads and wrong arguments: the scope is never torn, nothing is lost silently."""
from __future__ import annotations

import _thread
import random
import signal
import threading
import time

import numpy as np
import pytest

from gradgen.framework import CPUPlace, Executor, Scope, optimizer
from gradgen.framework.io import arrays_from_npz, load_params, save_params
from gradgen.framework.errors import ExecutionError, FeedError
from gradgen.framework.runtime.executor import CHECK_TYPES_ENV
from gradgen.program import Program, layers, program_guard

N_PARAMS = 40


def _counting_model(n_params: int = N_PARAMS, size: int = 4):
    """Every step subtracts exactly 1.0 from every element of every parameter (SGD, gradient 1, rate 1)."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        params = [layers.create_parameter([size], "float64", name=f"p{i}") for i in range(n_params)]
        loss = layers.sum([layers.reduce_sum(p) for p in params])
        optimizer.SGD(learning_rate=1.0).minimize(loss)
    scope = Scope()
    Executor().run(startup, scope=scope)  # the learning rate
    for p in params:
        scope.set(p.name, np.zeros(size))
    return main, loss, scope


def _steps_in_scope(scope: Scope, n_params: int = N_PARAMS) -> set[float]:
    """The step count each parameter shows: a torn commit shows two."""
    return {float(-v) for i in range(n_params) for v in scope[f"p{i}"]}


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt for the test, as in an interactive Python: a process started in the
    background by a non-interactive shell (``cmd &``) inherits SIGINT ignored, and ``_thread.interrupt_main`` then
    does nothing, so a loop that only an interrupt ends would never end."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class _Interrupter:
    """Interrupts the main thread after ``delay`` seconds, and again every 0.5 s until it says it caught one: an
    interrupt that lands inside a garbage collector's callback (hypothesis installs one) is reported there as
    unraisable and lost, and the loop it was to end would run on for good."""

    def __init__(self, delay: float):
        self.caught, self.lock = threading.Event(), threading.Lock()
        self.thread = threading.Thread(target=self._interrupt, args=(delay,), daemon=True)

    def _interrupt(self, delay: float) -> None:
        time.sleep(delay)
        while True:
            with self.lock:
                if self.caught.is_set():
                    return
                _thread.interrupt_main()
            if self.caught.wait(0.5):
                return

    def got_it(self) -> None:
        with self.lock:  # (no second interrupt can be sent once this returns)
            self.caught.set()


def test_interrupts_at_random_moments_never_tear_the_commit(sigint_raises):
    main, loss, scope = _counting_model()
    exe = Executor()
    started = time.perf_counter()
    for _ in range(20):
        exe.run(main, fetch_list=[loss], scope=scope)
    per_run = (time.perf_counter() - started) / 20
    rng = random.Random(0)
    seen: set[float] = set()
    last = 0.0
    for _ in range(150):
        interrupter = _Interrupter(rng.uniform(0.0, 3 * per_run))
        try:
            interrupter.thread.start()  # inside the try: a tiny delay can interrupt start() itself
            while True:  # only the interrupt ends this loop, so it lands inside some run
                exe.run(main, fetch_list=[loss], scope=scope)
        except KeyboardInterrupt:
            interrupter.got_it()
        interrupter.thread.join()
        steps = _steps_in_scope(scope)
        assert len(steps) == 1, f"parameters are at steps {sorted(steps)}"
        (step,) = steps
        assert step.is_integer() and step >= last  # whole SGD steps only, never undone
        last = step
        seen |= steps
    assert len(seen) > 20  # training went on between the interrupts
    exe.run(main, scope=scope)  # the executor still works after being interrupted
    assert len(_steps_in_scope(scope)) == 1


def test_two_executors_training_on_one_scope_from_two_threads_lose_no_update():
    main, loss, scope = _counting_model(n_params=4, size=1000)
    steps = 400
    errors = []

    def train():
        try:
            exe = Executor()
            for _ in range(steps):
                exe.run(main, fetch_list=[loss], scope=scope)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=train) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _steps_in_scope(scope, 4) == {2.0 * steps}


def test_one_executor_shared_by_two_threads_loses_no_update():
    main, loss, scope = _counting_model(n_params=4, size=1000)
    exe = Executor()
    threads = [threading.Thread(target=lambda: [exe.run(main, scope=scope) for _ in range(300)]) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _steps_in_scope(scope, 4) == {600.0}


def test_feeding_an_updated_persistable_var_leaves_the_scope_alone():
    main, loss, scope = _counting_model(n_params=2)
    exe = Executor()
    (p0,) = exe.run(main, feed={"p0": np.full(4, 10.0)}, fetch_list=["p0"], scope=scope)
    np.testing.assert_array_equal(p0, np.full(4, 9.0))        # the run updated the fed value...
    np.testing.assert_array_equal(scope["p0"], np.zeros(4))   # ...for this run only
    np.testing.assert_array_equal(scope["p1"], -np.ones(4))   # the unfed parameter trained as usual
    exe.run(main, scope=scope)
    np.testing.assert_array_equal(scope["p0"], -np.ones(4))


def _two_programs():
    first, second = Program(), Program()
    with program_guard(first, Program()):
        x1 = layers.data("x", [2], "float64")
        y1 = layers.scale(x1, 2.0, name="y")
    with program_guard(second, Program()):
        x2 = layers.data("x", [2], "float64")
        y2 = layers.scale(x2, 3.0, name="y")
    return first, x1, y1, second, x2, y2


def test_a_variable_of_another_program_is_an_error_not_a_lookup_by_name():
    first, x1, y1, second, x2, y2 = _two_programs()
    exe = Executor()
    with pytest.raises(ExecutionError, match="fetched Variable 'y' belongs to another Program"):
        exe.run(second, feed={"x": np.ones(2)}, fetch_list=[y1], scope=Scope())
    with pytest.raises(ExecutionError, match="feed Variable 'x' belongs to another Program"):
        exe.run(second, feed={x1: np.ones(2)}, fetch_list=[y2], scope=Scope())
    (got,) = exe.run(second, feed={x2: np.ones(2)}, fetch_list=[y2], scope=Scope())
    np.testing.assert_array_equal(got, [3.0, 3.0])


@pytest.mark.parametrize("kwargs,error,message", [
    ({"feed": [("x", np.ones(2))]}, FeedError, "feed must be a dict of var name -> array, got list"),
    ({"feed": {0: np.ones(2)}}, FeedError, r"feed keys must be var names \(str\) or Variables, got 0 \(int\)"),
    ({"feed": {b"x": np.ones(2)}}, FeedError, "feed keys must be var names"),
    ({"fetch_list": "y"}, ExecutionError, "fetch_list must be a list of Variables or names, got str"),
    ({"fetch_list": [3]}, ExecutionError, "fetch_list items must be Variables or names, got int"),
    ({"scope": {}}, ExecutionError, "scope must be a Scope, got dict"),
])
def test_wrong_arguments_say_what_was_expected(kwargs, error, message):
    first, x1, y1, *_ = _two_programs()
    args = {"feed": {"x": np.ones(2)}, "fetch_list": [y1], "scope": Scope(), **kwargs}
    with pytest.raises(error, match=message):
        Executor().run(first, **args)


def test_a_string_where_a_program_is_expected():
    with pytest.raises(ExecutionError, match=r"program must be a Program, got str \(load a program file with"):
        Executor().run("main.json", scope=Scope())


def test_places_are_accepted_as_paddle_does(monkeypatch):
    # the suite turns type checks on for every Executor; a user's are off
    monkeypatch.delenv(CHECK_TYPES_ENV, raising=False)
    for place in (None, CPUPlace(), "cpu", "CPU"):
        exe = Executor(place)
        assert exe.place == CPUPlace() and not exe.check_nan_inf and not exe.check_types
    assert Executor(check_nan_inf=True).check_nan_inf
    monkeypatch.setenv(CHECK_TYPES_ENV, "1")
    assert Executor().check_types and not Executor(check_types=False).check_types


@pytest.mark.parametrize("place,message", [
    ("CPUPlace", "got 'CPUPlace'"),
    ("tpu:0", "got 'tpu:0'"),
    ("gpu:0", "numpy backend runs on the CPU"),  # a GPU place needs a compiled backend (backends.md)
    (True, "the check flags are keyword-only"),
])
def test_anything_else_is_not_taken_for_a_flag(place, message):
    with pytest.raises(ExecutionError, match=message):
        Executor(place)
    with pytest.raises(TypeError):
        Executor(None, True)


class _SlowScope(Scope):
    """A scope whose every read takes 0.2 ms, as a big scope's reads would: a reader of all the parameters then
    spans several runs of a training thread, unless it takes turns with them."""

    def __getitem__(self, name):
        time.sleep(0.0002)
        return super().__getitem__(name)


def _training_in_a_thread(seconds: float, between):
    """Train the counting model on a slow scope in a thread while ``between(main, scope)`` is called in a loop
    for ``seconds``; returns the scope."""
    main, _, counted = _counting_model()
    scope = _SlowScope()
    scope.update({name: counted[name] for name in counted})
    stop, errors = threading.Event(), []

    def train():
        try:
            exe = Executor()
            while not stop.is_set():
                exe.run(main, scope=scope)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    try:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            between(main, scope)
    finally:
        stop.set()
        thread.join()
    assert not errors
    return scope


def test_save_params_while_another_thread_trains_writes_one_step(tmp_path):
    """save_params reads the scope under its run lock, so a checkpoint never mixes two steps."""
    path = tmp_path / "params.npz"
    saved: list[set[float]] = []

    def save(main, scope):
        save_params(path, main, scope)
        arrays = arrays_from_npz(str(path))
        saved.append({float(-v) for i in range(N_PARAMS) for v in arrays[f"p{i}"]})

    _training_in_a_thread(1.5, save)
    torn = [sorted(steps) for steps in saved if len(steps) != 1]
    assert not torn, f"{len(torn)} of {len(saved)} checkpoints mix steps, e.g. {torn[0]}"
    assert len({min(steps) for steps in saved}) > 1, "training went on between the saves"


def test_load_params_while_another_thread_trains_is_not_overwritten_by_a_run_under_way(tmp_path):
    """load_params stores under the run lock: a run that read the old values cannot commit over the loaded ones."""
    path = tmp_path / "params.npz"
    loaded = []

    def load(main, scope):
        if loaded:
            return
        with scope.run_lock:
            before = max(_steps_in_scope(scope))
        if before < 1:
            return  # load once training is under way
        save_params(path, main, _file_scope(-1000.0))
        load_params(path, main, scope)
        loaded.append(before)

    scope = _training_in_a_thread(1.5, load)
    assert loaded, "training never got under way"
    steps = _steps_in_scope(scope)
    assert len(steps) == 1 and min(steps) < -900, f"the loaded values (step -1000 and on) were lost: {sorted(steps)}"


def _file_scope(step: float) -> Scope:
    """A scope holding the counting model's parameters at ``step`` (and its learning rate)."""
    _, _, scope = _counting_model()
    for i in range(N_PARAMS):
        scope.set(f"p{i}", np.full(4, -step))
    return scope
