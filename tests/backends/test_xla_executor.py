"""What the executor promises on the xla backend as on numpy: refusals up front, one compile per run-time shape,
all-or-nothing commits, declared dtypes, the caller's own arrays, the scope as the source of truth."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, FeedError, Scope, backends, optimizer
from gradgen.program import Program, layers, program_guard
from tests.backends.xla_harness import need_jax


def _regression(dtype: str = "float64"):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], dtype)
        y = layers.data("y", [-1, 1], dtype)
        w = layers.create_parameter([3, 1], dtype, name="w")
        loss = layers.reduce_mean(layers.square(layers.matmul(x, w) - y))
        optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _feed(n: int, dtype: str = "float64", seed: int = 0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 3)).astype(dtype), "y": rng.standard_normal((n, 1)).astype(dtype)}


def test_backends_lists_what_is_installed():
    names = backends()
    assert names[0] == "numpy"
    try:
        import jax  # noqa: F401
        assert "xla" in names
    except ModuleNotFoundError:
        assert "xla" not in names


def test_an_unknown_backend_is_an_error_naming_the_known_ones():
    with pytest.raises(ExecutionError, match="unknown backend 'tpu'.*numpy, xla"):
        Executor(backend="tpu")


def test_numpy_only_settings_are_refused_on_a_compiled_backend():
    need_jax()
    with pytest.raises(ExecutionError, match="check_nan_inf"):
        Executor(backend="xla", check_nan_inf=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_training_matches_numpy_and_keeps_the_declared_dtype(dtype):
    need_jax()
    main, startup, loss = _regression(dtype)
    losses, params = {}, {}
    for backend in ("numpy", "xla"):
        exe, scope = Executor(backend=backend), Scope()
        exe.run(startup, scope=scope)
        losses[backend] = [exe.run(main, feed=_feed(8, dtype, s), fetch_list=[loss], scope=scope)[0] for s in range(5)]
        params[backend] = scope["w"]
        assert scope["w"].dtype == np.dtype(dtype) and losses[backend][0].dtype == np.dtype(dtype)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(losses["xla"], losses["numpy"], rtol=tol)
    np.testing.assert_allclose(params["xla"], params["numpy"], rtol=tol)


def test_a_minus_one_dim_compiles_once_per_shape():
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    built = exe.plans_built
    for n in (4, 4, 6, 4, 6, 6):
        exe.run(main, feed=_feed(n), fetch_list=[loss], scope=scope)
    assert exe.plans_built - built == 2


def test_fetched_arrays_are_the_callers_own():
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    (got, w) = exe.run(main, feed=_feed(4), fetch_list=[loss, "w"], scope=scope)
    w[...] = 7.0  # writeable, and not the scope's
    assert not np.any(scope["w"] == 7.0)


def test_a_value_stored_in_the_scope_is_what_the_next_run_reads():
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    scope.set("w", np.zeros((3, 1)))
    feed = _feed(4)
    (got,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    np.testing.assert_allclose(got, np.mean(feed["y"] ** 2), rtol=1e-12)


def test_a_fed_persistable_is_not_committed():
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    before = scope["w"].copy()
    exe.run(main, feed={**_feed(4), "w": np.ones((3, 1))}, fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(scope["w"], before)


def test_a_failed_run_commits_nothing():
    """An id out of range (which XLA would clamp) fails the run, after the update was computed: nothing lands."""
    need_jax()
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        ids = layers.data("ids", [-1], "int64")
        w = layers.create_parameter([3, 1], "float64", name="w")
        loss = layers.reduce_mean(layers.gather(layers.matmul(x, w), ids))
        optimizer.SGD(0.1).minimize(loss)
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    x = np.ones((4, 3))
    exe.run(main, feed={"x": x, "ids": np.array([0, 3])}, fetch_list=[loss], scope=scope)
    before = scope["w"].copy()
    with pytest.raises(ExecutionError, match="gather"):
        exe.run(main, feed={"x": x, "ids": np.array([0, 9])}, fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(scope["w"], before)


def test_a_bad_feed_is_a_feed_error():
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(FeedError):
        exe.run(main, feed={"x": np.zeros((4, 2)), "y": np.zeros((4, 1))}, fetch_list=[loss], scope=scope)


def test_ops_without_a_lowering_are_refused_before_anything_runs_all_named():
    need_jax()
    from gradgen.framework.backend.xla import lowerings

    main, startup, loss = _regression()
    missing = {"matmul": lowerings.LOWERINGS["matmul"], "square": lowerings.LOWERINGS["square"]}
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    try:
        for op_type in missing:
            del lowerings.LOWERINGS[op_type]
        with pytest.raises(ExecutionError) as e:
            exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    finally:
        lowerings.LOWERINGS.update(missing)
    assert "(matmul)" in str(e.value) and "(square)" in str(e.value) and "no xla lowering" in str(e.value)


def _gpus() -> int:
    try:
        import jax
        return len(jax.devices("gpu"))
    except (ModuleNotFoundError, RuntimeError):
        return 0


def test_a_gpu_place_needs_a_compiled_backend():
    from gradgen.framework import CUDAPlace

    with pytest.raises(ExecutionError, match="numpy backend runs on the CPU"):
        Executor(CUDAPlace(0))


@pytest.mark.skipif(_gpus() > 0, reason="this machine has a GPU: test_training_on_the_gpu runs instead")
def test_a_gpu_place_without_a_gpu_says_what_jax_sees():
    need_jax()
    from gradgen.framework import CUDAPlace

    with pytest.raises(ExecutionError, match=r"jax sees 0 GPU.*jax\[cuda12\]"):
        Executor("gpu:0", backend="xla")


@pytest.mark.skipif(_gpus() == 0, reason="no GPU here (design_docs/backends.md says how to run this on one)")
def test_training_on_the_gpu_matches_the_cpu():
    from gradgen.framework import CUDAPlace

    main, startup, loss = _regression("float32")
    losses = {}
    for place in (None, CUDAPlace(0)):
        exe, scope = Executor(place, backend="xla"), Scope()
        exe.run(startup, scope=scope)
        losses[place] = [exe.run(main, feed=_feed(8, "float32", s), fetch_list=[loss], scope=scope)[0]
                         for s in range(5)]
    np.testing.assert_allclose(losses[None], list(losses.values())[1], rtol=1e-5)


def test_training_on_a_device_that_is_not_the_default_matches_it():
    """What a GPU run does (feeds and scope values placed on the device, the step compiled for it, updates donated
    and kept there, fetches copied back; loops past their first History rows), on a second CPU device: the
    regression's losses and the rnn's gradients equal the default device's, and the weights stay on the device."""
    need_jax()
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "tests.backends.second_device"], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["placed"]["w_on"] == [got["second"]] and got["default"]["w_on"] != [got["second"]], got
    np.testing.assert_allclose(got["placed"]["losses"], got["default"]["losses"], rtol=1e-12)
    for placed, default in zip(got["placed"]["rnn"], got["default"]["rnn"]):
        np.testing.assert_allclose(placed, default, rtol=1e-12, atol=1e-14)


def test_backends_md_holds_the_generated_lowering_table():
    need_jax()
    from pathlib import Path

    from gradgen.framework.backend.xla.doc_table import with_table

    doc = (Path(__file__).resolve().parents[2] / "design_docs" / "backends.md").read_text(encoding="utf-8")
    assert with_table(doc) == doc, "stale: python -m gradgen.framework.backend.xla.doc_table --write design_docs/backends.md"


def test_a_view_the_caller_holds_keeps_its_values_when_the_next_run_reuses_memory():
    """The scope keeps the backend's arrays and lends their memory to the next run's new values (donation); a
    numpy view someone still holds must keep the values it had."""
    need_jax()
    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    held = scope["w"]
    assert isinstance(held, np.ndarray)
    before = held.copy()
    for seed in range(3):
        exe.run(main, feed=_feed(4, seed=seed), fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(held, before)
    assert not np.array_equal(scope["w"], before)


def test_a_parent_scopes_values_are_read_not_lent():
    need_jax()
    main, startup, loss = _regression()
    exe, parent = Executor(backend="xla"), Scope()
    exe.run(startup, scope=parent)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=parent)  # the parent now holds the backend's array
    before = parent["w"].copy()
    child = parent.new_scope()
    for seed in range(2):
        exe.run(main, feed=_feed(4, seed=seed), fetch_list=[loss], scope=child)
    np.testing.assert_array_equal(parent["w"], before)
    assert not np.array_equal(child["w"], before)


def test_the_numpy_backend_runs_on_a_scope_the_xla_backend_filled():
    need_jax()
    main, startup, loss = _regression()
    scope = Scope()
    Executor(backend="xla").run(startup, scope=scope)
    (xla_loss,) = Executor(backend="xla").run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    (np_loss,) = Executor().run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    assert np_loss < xla_loss and type(scope.own("w")) is np.ndarray


def test_a_jax_array_feed_goes_in_as_it_is_and_trains_as_the_numpy_feed_does(monkeypatch):
    """A feed already on the device (a jax array of the declared type) is not copied to host memory and back;
    one of another dtype or shape is the same FeedError as a numpy feed's."""
    need_jax()
    import jax

    from gradgen.framework.backend.xla import compile as xla_compile
    from gradgen.framework.backend.xla.compile import x64

    main, startup, loss = _regression()
    called: list = []
    real = xla_compile.CompiledBlock.__call__
    monkeypatch.setattr(xla_compile.CompiledBlock, "__call__", lambda self, feeds, *rest: (
        "x" in self.feeds and called.append(dict(zip(self.feeds, feeds)))) or real(self, feeds, *rest))
    fed: list = []
    results = {}
    for on_device in (False, True):
        exe, scope = Executor(backend="xla"), Scope()
        exe.run(startup, scope=scope)
        runs = []
        for s in range(3):
            feed = _feed(8, seed=s)
            if on_device:
                with x64():
                    feed = {"x": jax.device_put(feed["x"]), "y": feed["y"]}
            fed.append(feed["x"])
            runs.append(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
        results[on_device] = (runs, np.array(scope["w"]))
    assert len(called) == 6 and all(got["x"] is x for got, x in zip(called, fed))  # device arrays went in as they are
    np.testing.assert_array_equal(results[True][0], results[False][0])
    np.testing.assert_array_equal(results[True][1], results[False][1])
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    with x64():
        narrow = jax.device_put(np.zeros((4, 2)))
    for bad, said in ((jax.numpy.zeros((4, 3), "float32"), "dtype float32"), (narrow, "shape")):
        with pytest.raises(FeedError, match=said):
            exe.run(main, feed={"x": bad, "y": np.zeros((4, 1))}, fetch_list=[loss], scope=scope)


def test_a_scope_value_fed_to_the_run_that_may_lend_it_is_copied_first():
    """A jax array the run also reads from the scope (and may donate) is checked like a numpy feed, so the run
    never reads a buffer it has lent."""
    need_jax()
    main, startup = Program(), Program()
    with program_guard(main, startup):
        w = layers.create_parameter([3, 3], "float64", name="w")
        v = layers.data("v", [3, 3], "float64")
        loss = layers.reduce_sum(layers.square(layers.matmul(v, w)))
        optimizer.SGD(0.1).minimize(loss)
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    want_exe, want_scope = Executor(), Scope()
    want_exe.run(startup, scope=want_scope)
    want_scope.set("w", np.array(scope["w"]))
    for _ in range(3):
        held = scope.own("w")
        got = exe.run(main, feed={"v": held}, fetch_list=[loss], scope=scope)[0]
        want = want_exe.run(main, feed={"v": np.array(want_scope["w"])}, fetch_list=[loss], scope=want_scope)[0]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(scope["w"], want_scope["w"], rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_another_librarys_array_of_another_dtype_is_refused_not_cast(backend):
    """A jax array has a dtype of its own: a float32 one fed to a float64 var is an error on both backends (it
    was cast silently, as a Python list is)."""
    need_jax()
    import jax.numpy as jnp

    main, startup, loss = _regression()
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(FeedError, match="has dtype float32"):
        exe.run(main, feed={"x": jnp.zeros((4, 3), "float32"), "y": np.zeros((4, 1))}, fetch_list=[loss], scope=scope)
    got = exe.run(main, feed={"x": [[1.0, 2.0, 3.0]], "y": [[0.5]]}, fetch_list=[loss], scope=scope)[0]
    assert got.dtype == np.float64  # a list still takes the declared dtype


def _regression_fetching_a_huge_constant(rows: int):
    """The regression step, plus a [rows, 1] float64 constant the run can fetch."""
    main, startup, loss = _regression()
    with program_guard(main, startup):
        huge = layers.fill_constant([rows, 1], "float64", 1.0)
    return main, startup, loss, huge


def test_an_allocation_xla_cannot_make_is_an_execution_error_naming_the_op_and_commits_nothing():
    """4 EiB (more than any address space, so no machine tries): XLA's RESOURCE_EXHAUSTED becomes gradgen's error
    naming the op whose output it was; the scope's values, which a run lends to XLA, are still there."""
    need_jax()
    main, startup, loss, huge = _regression_fetching_a_huge_constant(2 ** 59)
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    before = scope["w"].copy()
    with pytest.raises(ExecutionError, match=r"RESOURCE_EXHAUSTED(.|\n)*op #\d+ \(fill_constant\)(.|\n)*"
                                             rf"makes {huge.name} float64\[{2 ** 59}, 1\](.|\n)*"
                                             r"run inputs: .*x float64\[4, 3\](.|\n)*nothing was committed"):
        exe.run(main, feed=_feed(4), fetch_list=[loss, huge], scope=scope)
    np.testing.assert_array_equal(scope["w"], before)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)  # the executor and the scope still work
    assert not np.array_equal(scope["w"], before)


def test_a_shape_no_array_can_hold_is_refused_before_xla_compiles_it():
    """XLA's compiler aborts the whole process on a byte size past int64 (a C++ terminate): refused first."""
    need_jax()
    main, startup, loss, huge = _regression_fetching_a_huge_constant(2 ** 62)
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    before = scope["w"].copy()
    with pytest.raises(ExecutionError, match=rf"op #\d+ \(fill_constant\).*makes {huge.name} "
                                             rf"float64\[{2 ** 62}, 1\].*more than any array can hold"):
        exe.run(main, feed=_feed(4), fetch_list=[loss, huge], scope=scope)
    np.testing.assert_array_equal(scope["w"], before)


@pytest.mark.parametrize("backend", ["numpy", "xla"])
def test_a_jax_array_whose_memory_is_gone_is_a_feed_error_not_jaxs(backend):
    need_jax()
    import jax

    main, startup, loss = _regression()
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    gone = jax.device_put(np.ones((4, 3)))
    gone.delete()
    with pytest.raises(FeedError, match="feed 'x' cannot be read as an array: RuntimeError: Array has been deleted"):
        exe.run(main, feed={**_feed(4), "x": gone}, fetch_list=[loss], scope=scope)


def test_a_call_that_fails_after_taking_the_scope_values_says_they_are_lost_and_reads_say_so(monkeypatch):
    """What is left of the all-or-nothing promise under donation: an executable that ran before fails (memory
    taken by someone else since) after XLA took the values it was lent. Simulated: the call deletes its lent
    arrays and raises as XLA does. The error names them, and a read says so instead of returning garbage."""
    need_jax()
    import jax

    main, startup, loss = _regression()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)  # the executable has run once: it lends w itself
    (entry,) = exe._runner._compiled.entries(main).values()
    (executable,) = entry.compiled._executables.values()

    def fails_after_taking(feed_values, donated, kept, host):
        for value in donated:
            value.delete()
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 7 bytes.")

    monkeypatch.setattr(executable, "compiled", fails_after_taking)
    with pytest.raises(ExecutionError, match=r"RESOURCE_EXHAUSTED(.|\n)*the largest op outputs: (.|\n)*"
                                             r"taken the memory of scope value\(s\) w, which are lost"):
        exe.run(main, feed=_feed(4), fetch_list=[loss], scope=scope)
    with pytest.raises(ExecutionError, match="scope value 'w' is lost: a failed run"):
        scope["w"]
