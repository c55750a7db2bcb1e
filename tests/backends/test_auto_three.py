"""``backend="auto"`` among three engines (numpy, xla, torch): the fastest is kept, whichever it is; an engine that
cannot run a program leaves that program's trial and the others still weigh it; and the real torch engine in the
trial (its steps built in the background), on a program it refuses (a while loop) and one it runs."""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.framework.backend.shared import weighing
from gradgen.framework.runtime import auto_run
from gradgen.framework.runtime import trial_rules
from gradgen.framework.runtime.auto_run import AutoRunner
from gradgen.framework.runtime.trial_rules import COMPILED_WARM, CUT_RATIO, CUT_RUNS, MIN_ROUNDS, NUMPY_FIRST
from gradgen.program import Program, layers, program_guard
from tests.backends.test_auto import _Clock, _noisy, _Preparing, _program, _runs, _StandIn, blocks
from tests.backends.test_torch_backend import need_torch

INLINE_WARM = COMPILED_WARM + 1


@pytest.fixture(autouse=True)
def _trial_from_the_third_run(monkeypatch):
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.0)
    monkeypatch.setattr(trial_rules, "BLOCK_SECONDS", 0.0)


@pytest.fixture
def _every_program(monkeypatch):
    """The stand-ins' program has no convolution: weigh torch for it anyway."""
    monkeypatch.setattr(auto_run, "WEIGHED_FOR", {})


def _three(costs: dict, torch_problems=lambda block: []):
    clock, log, told = _Clock(), [], []
    runner = AutoRunner(_StandIn("numpy", clock, costs["numpy"], log),
                        [_StandIn("xla", clock, costs["xla"], log),
                         _StandIn("torch", clock, costs["torch"], log, problems=torch_problems)],
                        lambda program, backend, reason: told.append((backend, reason)), clock)
    return runner, log, told


@pytest.mark.usefixtures("_every_program")
@pytest.mark.parametrize("want", ["numpy", "xla", "torch"])
def test_the_fastest_of_three_is_kept(want):
    """The engine that looks fastest (numpy by its second run, the others by their warm runs) runs its block first;
    each other's block ends at its ``CUT_RUNS``-th timed run, each over ``CUT_RATIO`` times the fastest's slowest: the
    trial is one whole block and two cut ones, and the cut engine that looked faster is the runner-up a check runs
    against."""
    costs = {"numpy": 1.0, "xla": 1.0, "torch": 1.0, want: 0.25}
    assert 1.0 > CUT_RATIO * 0.25
    runner, log, told = _three(costs)
    program = _program()
    behind = [name for name in ("numpy", "xla", "torch") if name != want]  # a tie in looks: in this order
    trial = blocks([(want, 0.25)], after="torch") + blocks([(name, 1.0) for name in behind], after=want,
                                                                timed=CUT_RUNS)
    warm = NUMPY_FIRST + 2 * INLINE_WARM
    trial_runs = warm + len(trial)
    _runs(runner, program, trial_runs - 1)
    assert told == []  # one timed run short
    _runs(runner, program, 1 + 3)
    assert log[:NUMPY_FIRST] == ["numpy"] * NUMPY_FIRST
    assert log[NUMPY_FIRST:warm] == ["xla"] * INLINE_WARM + ["torch"] * INLINE_WARM
    assert log[warm:trial_runs] == trial
    assert log[trial_runs:] == [want] * 3
    assert len(told) == 1 and told[0][0] == want and f"{want} 250 ms" in told[0][1]
    assert all(f"{name} left after 2 runs of 1e+03 ms or more, over 2x {want}'s slowest (250 ms)" in told[0][1]
               for name in behind)
    assert runner.trial(program, {"x": np.zeros((2, 4))}, ["loss"]).runner_up == behind[0]


@pytest.mark.usefixtures("_every_program")
@pytest.mark.parametrize("cut_runs,want", [(CUT_RUNS, "torch"), (1, "xla")])
def test_one_slow_run_does_not_cut_the_fastest_engine(monkeypatch, cut_runs, want):
    """torch (0.25 s a run) looks slower than xla in its warm runs, so its block follows xla's whole one, and its
    first timed run meets a hiccup (1.5 s, over ``CUT_RATIO`` times xla's slowest 0.6): with ``CUT_RUNS`` its
    second run (0.25) keeps it in the contest, and it is chosen; cut after one run, as before, xla was kept."""
    monkeypatch.setattr(trial_rules, "CUT_RUNS", cut_runs)
    assert 1.5 > CUT_RATIO * 0.6 > 1.0
    runner, log, told = _three({"numpy": 1.0, "xla": 0.6, "torch": 0.25})
    costs = itertools.chain([0.7] * INLINE_WARM + [0.25, 1.5], itertools.repeat(0.25))
    runner.runners["torch"].run = _noisy(runner.runners["torch"], costs)
    _runs(runner, _program(), 80)
    assert told and told[0][0] == want
    assert ("torch left after" in told[0][1]) is (want != "torch")


@pytest.mark.usefixtures("_every_program")
def test_an_engine_clearly_behind_after_a_round_leaves_while_the_close_ones_go_on():
    """numpy (1 s a run) is apart from the fastest after the first round, under ``CUT_RATIO`` times it, while xla
    and torch (0.5-0.7 s, overlapping) are not: the later rounds run xla and torch only, and the choice says why
    numpy left."""
    runner, log, told = _three({"numpy": 1.0, "xla": 0.6, "torch": 0.6})
    assert 1.0 < CUT_RATIO * 0.6  # (the slowest run of a fast block takes 0.6 s or more: numpy is not cut)
    runner.runners["xla"].run = _noisy(runner.runners["xla"], itertools.cycle([0.5, 0.7, 0.6]))
    runner.runners["torch"].run = _noisy(runner.runners["torch"], itertools.cycle([0.55, 0.65, 0.6]))
    numpy_block = blocks([("numpy", 1.0)], after="torch")
    _runs(runner, _program(), 60)
    assert told and told[0][0] in ("xla", "torch")
    assert log.count("numpy") == NUMPY_FIRST + len(numpy_block)  # its one block of the trial, no second
    assert log.count("xla") + log.count("torch") > 2 * (INLINE_WARM + len(blocks([("xla", 0.6)], after="numpy")))
    assert "numpy left after 3 runs (median 1e+03 ms), apart from" in told[0][1]


@pytest.mark.usefixtures("_every_program")
def test_an_engine_ready_first_warms_up_while_another_still_prepares():
    """torch is ready while xla still compiles: its untimed warm run comes then (on the anchors' transformer,
    whose harness runs one step a round, the warm run would otherwise be one of the few after xla's compile), and
    the runs after it stay on numpy until xla is ready; then xla warms and the blocks follow, torch's without a
    second warm run (numpy's ends at its ``CUT_RUNS``-th timed run: each over ``CUT_RATIO`` times torch's)."""
    clock, log, told = _Clock(), [], []
    xla, torch = _Preparing("xla", clock, 0.5, log), _Preparing("torch", clock, 0.25, log)
    runner = AutoRunner(_StandIn("numpy", clock, 1.0, log), [xla, torch],
                        lambda program, backend, reason: told.append((backend, reason)), clock)
    program = _program()
    _runs(runner, program, NUMPY_FIRST + 1)
    torch.go.set()
    assert torch.done.wait(10)
    time.sleep(0.05)  # the thread marks the trial ready after prepare returns
    _runs(runner, program, 3)
    assert log == ["numpy"] * (NUMPY_FIRST + 1) + ["torch"] * COMPILED_WARM + ["numpy"] * (3 - COMPILED_WARM)
    xla.go.set()
    assert xla.done.wait(10)
    time.sleep(0.05)
    del log[:]
    trial = blocks([("torch", 0.25), ("xla", 0.5)], after="xla") + blocks([("numpy", 1.0)], "xla", timed=CUT_RUNS)
    _runs(runner, program, COMPILED_WARM + len(trial) + 1)
    assert log == ["xla"] * COMPILED_WARM + trial + ["torch"]
    assert told[0][0] == "torch"


@pytest.mark.usefixtures("_every_program")
def test_an_engine_that_cannot_run_the_program_sits_its_trial_out():
    refused = "block 0, op #3 (while): no torch kernel"
    runner, log, told = _three({"numpy": 1.0, "xla": 0.5, "torch": 0.1}, torch_problems=lambda block: [refused])
    _runs(runner, _program(), NUMPY_FIRST + INLINE_WARM + 2 * MIN_ROUNDS + 2)
    assert "torch" not in log
    assert told[0][0] == "xla" and f"torch cannot run it: {refused}" in told[0][1]


def test_torch_is_weighed_for_programs_with_large_products():
    """``backend.WEIGHED_FOR["torch"]``: a product of 1000 x 500 a sample is weighed from
    ``PRODUCT_WORK_FOR_TORCH`` multiply-adds a run on, and left out below, saying how much it has."""
    main = Program()
    with program_guard(main, Program()):
        w = layers.create_parameter([1000, 500], "float32", name="w")
        layers.reduce_mean(layers.matmul(layers.data("x", [-1, 1000], "float32"), w), name="loss")
    block, at_limit = main.global_block(), weighing.PRODUCT_WORK_FOR_TORCH // 500_000
    assert weighing.product_work(block, at_limit) == weighing.PRODUCT_WORK_FOR_TORCH
    assert weighing.WEIGHED_FOR["torch"](block, at_limit) is None
    why = weighing.WEIGHED_FOR["torch"](block, at_limit - 1)
    assert why is not None and "products of at least 500 M" in why


def test_torch_is_weighed_only_for_programs_with_large_convolutions():
    """``backend.WEIGHED_FOR``: asked before anything imports torch; the fc program leaves it out, and so does a
    convolution whose multiply-adds at this run's batch are under ``CONVOLUTION_WORK_FOR_TORCH``; the same
    program fed a larger batch brings it in (a new trial: the feed's shapes changed)."""
    runner, log, told = _three({"numpy": 1.0, "xla": 0.5, "torch": 0.1})
    _runs(runner, _program(), NUMPY_FIRST + INLINE_WARM + len(blocks([("xla", 0.5), ("numpy", 1.0)], "xla")) + 1)
    assert "torch" not in log and told[0][0] == "xla" and "(this program's: none)" in told[0][1]
    conv = Program()
    with program_guard(conv, Program()):  # 2 x 2 x 2 outputs of a 1 x 3 x 3 window: 72 multiply-adds a sample
        layers.reduce_mean(layers.conv2d(layers.data("x", [-1, 1, 4, 4], "float64"), 2, 3, name="c"), name="loss")
    small = {"x": np.zeros((2, 1, 4, 4))}
    assert weighing.convolution_work(conv.global_block(), 2) == 144
    runner, log, told = _three({"numpy": 1.0, "xla": 0.5, "torch": 0.1})
    _runs(runner, conv, NUMPY_FIRST + INLINE_WARM + len(blocks([("xla", 0.5), ("numpy", 1.0)], "xla")) + 1,
          feed=small)
    assert "torch" not in log and "(this program's: 0.00014 M)" in told[0][1]
    large = weighing.CONVOLUTION_WORK_FOR_TORCH // 72 + 1
    runner, log, told = _three({"numpy": 1.0, "xla": 0.5, "torch": 0.1})
    trial = blocks([("xla", 0.5), ("torch", 0.1), ("numpy", 1.0)], after="torch")
    _runs(runner, conv, NUMPY_FIRST + 2 * INLINE_WARM + len(trial) + 1, feed={"x": np.zeros((large, 1, 4, 4))})
    assert told[0][0] == "torch"


def test_xla_is_weighed_only_for_convolutions_under_its_limit():
    """``backend.WEIGHED_FOR["xla"]``: a program whose convolutions do ``CONVOLUTION_WORK_FOR_XLA`` multiply-adds
    or more at this run's batch leaves xla out, saying why; one batch fewer brings it back; unknown work weighs it."""
    conv = Program()
    with program_guard(conv, Program()):  # 2 x 2 x 2 outputs of a 1 x 3 x 3 window: 72 multiply-adds a sample
        layers.reduce_mean(layers.conv2d(layers.data("x", [-1, 1, 4, 4], "float64"), 2, 3, name="c"), name="loss")
    at_limit = -(-weighing.CONVOLUTION_WORK_FOR_XLA // 72)
    why = weighing.WEIGHED_FOR["xla"](conv.global_block(), at_limit)
    assert why is not None and "xla is weighed only for convolutions under 1 G" in why
    assert "(this program's: 1 G)" in why
    assert weighing.WEIGHED_FOR["xla"](conv.global_block(), at_limit - 1) is None
    unknown = Program()
    with program_guard(unknown, Program()):
        layers.conv2d(layers.data("x", [-1, 1, -1, -1], "float64"), 2, 3, name="c")
    assert weighing.WEIGHED_FOR["xla"](unknown.global_block(), 10 ** 9) is None


def _wide_mlp(layer_count: int, sample_dims: tuple = (), width: int = 1024, then=lambda h: h) -> Program:
    """``layer_count`` relu layers of ``width`` (each sample ``sample_dims`` rows of them), ``then`` applied, summed
    squared error, SGD: a step of large products and little else."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, *sample_dims, width], "float32")
        for i in range(layer_count):
            h = layers.relu(h @ layers.create_parameter([width, width], "float32", name=f"w{i}"))
        optimizer.SGD(0.1).minimize(layers.reduce_sum(layers.square(then(h)), name="loss"))
    return main


def test_no_compiled_engine_is_weighed_for_a_step_of_large_products():
    """``weighing.product_bound``: four 1024-wide layers at batch 256 do 3 G multiply-adds of 2-D products (four
    forward, four for the weights, three for the inputs), over ``PRODUCT_BOUND_RATIO`` per element the rest
    writes: no engine is weighed, and the reason says why. Weighed again: the same layers at batch 64 (under
    ``PRODUCT_BOUND_WORK``), on 3-D samples (batched products), and with a hundred tanh after them (eight times
    the elements to write)."""
    block = _wide_mlp(4).global_block()
    products, other = weighing.product_work(block, 256), weighing.other_elements(block, 256)
    assert products == 11 * 256 * 1024 * 1024 and products >= weighing.PRODUCT_BOUND_RATIO * other
    why = weighing.product_bound(block, 256)  # (asked once, for every engine: the program stays on numpy)
    assert why is not None and "its step is large matrix products (2.95 G multiply-adds" in why
    assert weighing.product_bound(block, 64) is None
    assert weighing.WEIGHED_FOR["torch"](block, 64) is None  # 0.74 G: over PRODUCT_WORK_FOR_TORCH
    assert weighing.product_bound(block, 1024) is not None  # the rows of 256 samples of 4 rows each, 2-D ...
    assert weighing.product_bound(_wide_mlp(4, (4,)).global_block(), 256) is None  # ... and 3-D
    def tanh_chain(h):
        for _ in range(100):
            h = layers.tanh(h)
        return h

    much_else = _wide_mlp(4, then=tanh_chain).global_block()
    assert weighing.product_work(much_else, 256) == products
    assert weighing.other_elements(much_else, 256) > 8 * other and weighing.product_bound(much_else, 256) is None


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64"])
def test_only_products_numpy_gives_its_blas_make_a_step_product_bound(dtype):
    """Four chained 1024 x 1024 products at batch 1024, nothing else: float32 and float64 are product-bound;
    numpy's float16 and integer products are its own loops, far slower than a BLAS, so the engines are weighed."""
    main = Program()
    with program_guard(main, Program()):
        h = layers.data("x", [-1, 1024], dtype)
        for i in range(4):
            h = h @ layers.data(f"w{i}", [1024, 1024], dtype)
    block = main.global_block()
    assert weighing.product_work(block, 1024) == 4 * 1024 ** 3 and weighing.other_elements(block, 1024) == 0
    assert (weighing.product_bound(block, 1024) is None) == (dtype not in ("float32", "float64"))


def test_a_step_of_large_products_stays_on_numpy_with_nothing_prepared():
    """An auto executor's trial of that MLP chooses numpy at once: no compiled engine runs or prepares, and the
    choice gives the reason once."""
    runner, log, told = _three({"numpy": 1.0, "xla": 0.5, "torch": 0.1})
    _runs(runner, _wide_mlp(4), NUMPY_FIRST + 5, feed={"x": np.zeros((256, 1024), np.float32)})
    assert set(log) == {"numpy"} and told[0][0] == "numpy"
    assert told[0][1].startswith("no compiled engine is weighed") and told[0][1].count("matrix products") == 1


def test_convolution_work_is_unknown_where_a_spatial_dim_is():
    """A -1 spatial dim (a fully convolutional net fed any size) or gradients without their forward op: the work
    is not known, and torch is weighed."""
    program = Program()
    with program_guard(program, Program()):
        layers.conv2d(layers.data("x", [-1, 1, -1, -1], "float64"), 2, 3, name="c")
    assert weighing.convolution_work(program.global_block(), 8) == float("inf")
    assert weighing.WEIGHED_FOR["torch"](program.global_block(), 8) is None


@pytest.mark.usefixtures("_every_program")
def test_numpy_is_kept_when_every_compiled_engine_refuses_and_the_reasons_say_so():
    runner = AutoRunner(_StandIn("numpy", _Clock(), 1.0, []),
                        [_StandIn("xla", _Clock(), 0.1, [], problems=lambda block: ["op a"]),
                         _StandIn("torch", _Clock(), 0.1, [], problems=lambda block: ["op b"])],
                        lambda *told: None, _Clock())
    trial = runner.trial(_program(), {"x": np.zeros((2, 4))}, ["loss"])
    assert trial.chosen == "numpy" and trial.reason == "xla cannot run it: op a; torch cannot run it: op b"


def _auto_on_torch_only(monkeypatch):
    """An auto executor weighing numpy and torch, its trial's run-time thresholds cut: these steps take a
    millisecond, and half a second of numpy runs plus 0.2 s of settling per block came to ~1,100 runs, which
    with a loaded suite ran past the 30 s the tests wait (the thresholds' own tests are in test_auto.py); torch
    weighed for these small convolutions too."""
    from gradgen.framework.runtime import executor
    monkeypatch.setattr(executor, "backends", lambda: ["numpy", "torch"])
    monkeypatch.setattr(weighing, "CONVOLUTION_WORK_FOR_TORCH", 0)
    monkeypatch.setattr(trial_rules, "NUMPY_SECONDS_FIRST", 0.0)
    monkeypatch.setattr(trial_rules, "SETTLE_SECONDS", 0.005)
    return Executor(backend="auto")


def _until_chosen(exe, main, feed, fetch, scope, seconds: float = 30.0):
    """Runs until auto has chosen (torch's import in the background takes a second or two)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        if exe.backend_choice(main) is not None:
            return out
        time.sleep(0.02)  # the background thread's turn
    raise AssertionError("no choice")


def test_a_while_loop_runs_under_auto_with_torch_installed_and_stays_off_torch(monkeypatch):
    need_torch()
    exe = _auto_on_torch_only(monkeypatch)
    main = Program()
    with program_guard(main, Program()):  # a convolution (torch is weighed) and a while loop (it cannot run it)
        image = layers.conv2d(layers.data("x", [-1, 1, 4, 4], "float64"), 2, 3, bias=False, name="c")
        limit = layers.data("n", [], "int64")
        i = layers.fill_constant([], "int64", 0)
        total = layers.reduce_sum(image)
        _, result = layers.while_loop(lambda i, s: layers.less_than(i, limit),
                                      lambda i, s: [i + 1, s + 1.5], [i, total])
    scope = Scope()
    scope.set("c.w", np.zeros((2, 1, 3, 3)))
    (got,) = _until_chosen(exe, main, {"n": np.array(4, np.int64), "x": np.ones((1, 1, 4, 4))}, [result], scope)
    assert float(got) == 6.0
    backend, reason = exe.backend_choice(main)
    assert backend == "numpy" and "torch cannot run it" in reason and "(while)" in reason


def test_auto_with_torch_trains_as_the_numpy_backend(monkeypatch):
    need_torch()
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 2, 6, 6)), rng.integers(0, 3, (8, 1))
    results = {}
    for name in ("numpy", "auto"):
        main, startup = Program(), Program()
        with program_guard(main, startup):
            h = layers.conv2d(layers.data("x", [-1, 2, 6, 6], "float64"), 3, 3, act="relu", name="c")
            logits = layers.fc(layers.reshape(h, [-1, 48]), 3, name="f")
            loss = layers.mean(layers.softmax_with_cross_entropy(logits, layers.data("y", [-1, 1], "int64")))
            optimizer.SGD(0.1).minimize(loss)
        exe = _auto_on_torch_only(monkeypatch) if name == "auto" else Executor(backend="numpy")
        scope = Scope()
        exe.run(startup, scope=scope)
        losses = [float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)[0]) for _ in range(4)]
        if name == "auto":
            _until_chosen(exe, main, {"x": x, "y": y}, [loss], scope)
            losses.append(float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)[0]))
            assert exe.backend_choice(main)[0] in ("numpy", "torch")
            assert "torch" in exe.backend_choice(main)[1]  # weighed: its median is in the reason
        results[name] = losses[:4]
    np.testing.assert_allclose(results["auto"], results["numpy"], rtol=1e-12)
