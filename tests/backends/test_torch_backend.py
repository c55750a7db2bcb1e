"""The torch engine against the numpy reference: every kernel test case of an op it claims (same dtypes and shapes,
float64 to 1e-12, float32 to 1e-5, NaN where numpy has NaN, the same refusals), the anchors' kinds of programs
trained three steps, and the refusals it owes (an op without a kernel, numpy-only settings)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from tests.backends.xla_harness import assert_same
from tests.extras import require
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case, one_op_program
from tests.onnx.extra_cases import EXTRA_CASES

CASES = ALL_CASES + EXTRA_CASES


def need_torch() -> None:
    require(None if importlib.util.find_spec("torch") else "torch", "pip install torch")


def run_on(backend: str, main, feed: dict, fetch: list, params: dict | None = None):
    scope = Scope()
    for name, value in (params or {}).items():
        scope.set(name, np.array(value))
    try:
        return Executor(backend=backend).run(main, feed=feed, fetch_list=fetch, scope=scope)
    except ExecutionError as e:
        return e


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_torch_matches_numpy_on_every_case_of_an_op_it_runs(case: Case):
    need_torch()
    from gradgen.framework.backend.torch import KERNELS

    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    got = run_on("torch", main, feed, fetch)
    if case.op not in KERNELS:  # refused whole, before anything runs, naming the op and why
        assert isinstance(got, ExecutionError) and f"({case.op})" in str(got) and "no torch kernel" in str(got)
        return
    want = run_on("numpy", main, feed, fetch)
    assert_same(want, got, fetch, case.id)


def test_every_op_it_claims_has_a_case():
    need_torch()
    from gradgen.framework.backend.torch import KERNELS

    covered = {c.op for c in CASES} | {"lstm_grad", "gru_grad", "lstm_jvp", "gru_jvp"}  # test_torch_recurrent.py,
    # test_torch_gru.py, test_torch_stepwise.py
    assert sorted(set(KERNELS) - covered) == []


# -- whole programs: the anchors' kinds of training step --------------------------------------------------------
def _lenet(dtype):
    from gradgen.program import layers
    img, lab = layers.data("x", [-1, 1, 12, 12], dtype), layers.data("y", [-1, 1], "int64")
    h = layers.pool2d(layers.conv2d(img, 4, 3, act="relu", name="c1"), 2, "max")
    h = layers.pool2d(layers.conv2d(h, 6, 3, padding=1, act="relu", name="c2"), 2, "avg")
    logits = layers.fc(layers.reshape(h, [-1, 24]), 10, name="f")
    feed = lambda rng: {"x": rng.standard_normal((8, 1, 12, 12)).astype(dtype),  # noqa: E731
                        "y": rng.integers(0, 10, (8, 1))}
    return layers.mean(layers.softmax_with_cross_entropy(logits, lab), name="loss"), feed


def _resnet(dtype):
    from gradgen.program import layers
    img, lab = layers.data("x", [-1, 8, 6, 6], dtype), layers.data("y", [-1, 1], "int64")
    a = layers.relu(layers.batch_norm(layers.conv2d(img, 8, 3, padding=1, bias=False, name="k0"), name="b0"))
    b = layers.batch_norm(layers.conv2d(a, 8, 3, stride=2, padding=1, bias=False, name="k1"), name="b1")
    h = layers.relu(b + layers.conv2d(img, 8, 1, stride=2, bias=False, name="k2"))
    logits = layers.fc(layers.reduce_mean(h, dim=[2, 3]), 5, name="fc")
    feed = lambda rng: {"x": rng.standard_normal((4, 8, 6, 6)).astype(dtype),  # noqa: E731
                        "y": rng.integers(0, 5, (4, 1))}
    return layers.mean(layers.softmax_with_cross_entropy(logits, lab), name="loss"), feed


def _transformer(dtype):
    from gradgen.program import layers
    S, D, H = 6, 8, 2
    xv, yv = layers.data("x", [-1, S, D], dtype), layers.data("y", [-1, S, D], dtype)
    h = layers.layer_norm(xv, begin_norm_axis=-1, name="ln1")

    def heads(t):
        return layers.transpose(layers.reshape(t, [0, S, H, D // H]), [0, 2, 1, 3])
    q, k, v = (heads(layers.fc(h, D, name=n)) for n in "qkv")
    att = layers.softmax(layers.scale(layers.matmul(q, k, transpose_y=True), 0.5), axis=-1)
    x1 = xv + layers.fc(layers.reshape(layers.transpose(layers.matmul(att, v), [0, 2, 1, 3]), [0, S, D]), D, name="o")
    out = x1 + layers.fc(layers.gelu(layers.fc(layers.layer_norm(x1, begin_norm_axis=-1, name="ln2"), 16,
                                               name="f1")), D, name="f2")
    feed = lambda rng: {"x": rng.standard_normal((3, S, D)).astype(dtype),  # noqa: E731
                        "y": rng.standard_normal((3, S, D)).astype(dtype)}
    return layers.reduce_mean(layers.square(out - yv), name="loss"), feed


def _trained(build, make_optimizer, dtype, backend: str, steps: int = 3):
    from gradgen.program import Program, program_guard
    main, startup = Program(), Program()
    with program_guard(main, startup):
        loss, feed = build(dtype)
        make_optimizer().minimize(loss)
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(7)
    losses = [exe.run(main, feed=feed(rng), fetch_list=[loss], scope=scope)[0] for _ in range(steps)]
    params = sorted(n for n, v in main.global_block().vars.items() if v.persistable)
    return losses, [np.asarray(scope[n]) for n in params], params


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("build,optimizer", [(_lenet, "Momentum"), (_resnet, "SGD"), (_transformer, "Adam")],
                         ids=["lenet", "resnet", "transformer"])
def test_training_steps_equal_numpys(build, optimizer, dtype):
    need_torch()
    from gradgen.framework import optimizer as optimizers
    make = {"Momentum": lambda: optimizers.Momentum(0.05, 0.9), "SGD": lambda: optimizers.SGD(0.1),
            "Adam": lambda: optimizers.Adam(0.01)}[optimizer]
    want_losses, want_params, names = _trained(build, make, dtype, "numpy")
    got_losses, got_params, _ = _trained(build, make, dtype, "torch")
    assert_same(want_losses, got_losses, [f"loss {k}" for k in range(3)], build.__name__)
    # The key bias's gradient is 0 in exact arithmetic (softmax does not see a shift along the keys): Adam turns its
    # rounding noise into steps of +-lr, which no two engines share. Every other parameter is compared.
    kept = [k for k, n in enumerate(names) if n != "k.b"]
    assert_same([want_params[k] for k in kept], [got_params[k] for k in kept], [names[k] for k in kept],
                build.__name__)
    assert len(set(float(v) for v in want_losses)) == 3  # the steps trained: each loss another


def test_a_program_with_an_op_it_lacks_is_refused_naming_the_op_before_anything_runs():
    need_torch()
    from gradgen.program import Program, layers, program_guard
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 3], "float64", name="w")
        layers.assign(layers.matmul(x, w), w)
        out = layers.cond(layers.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: x)
    scope = Scope()
    scope.set("w", np.eye(3))
    with pytest.raises(ExecutionError, match=r"op #\d+ \(cond\).*no torch kernel"):
        Executor(backend="torch").run(main, feed={"x": np.ones((2, 3))}, fetch_list=[out], scope=scope)
    np.testing.assert_array_equal(scope["w"], np.eye(3))


def test_a_run_leaves_the_scope_and_the_feeds_as_they_were_when_an_op_fails():
    need_torch()
    from gradgen.program import Program, layers, program_guard
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x, ids = layers.data("x", [-1, 3], "float64"), layers.data("ids", [-1], "int64")
        w = layers.create_parameter([3], "float64", name="w")
        layers.assign(w * 2.0, w)
        out = layers.gather(x, ids)
    scope, x_value = Scope(), np.ones((2, 3))
    scope.set("w", np.arange(3.0))
    exe = Executor(backend="torch")
    with pytest.raises(ExecutionError, match=r"\(gather\), created at .* failed: IndexError"):
        exe.run(main, feed={"x": x_value, "ids": np.array([0, 5])}, fetch_list=[out, w], scope=scope)
    np.testing.assert_array_equal(scope["w"], np.arange(3.0))
    got, w_new = exe.run(main, feed={"x": x_value, "ids": np.array([1])}, fetch_list=[out, w], scope=scope)
    np.testing.assert_array_equal(w_new, np.arange(3.0) * 2)
    got[...] = 7  # the caller's own array: the feed keeps its values
    np.testing.assert_array_equal(x_value, np.ones((2, 3)))


def test_numpy_only_settings_are_refused():
    need_torch()
    with pytest.raises(ExecutionError, match="check_nan_inf"):
        Executor(backend="torch", check_nan_inf=True).run(_one_program(), fetch_list=[], scope=Scope())


def _one_program():
    from gradgen.program import Program, layers, program_guard
    main = Program()
    with program_guard(main, Program()):
        layers.fill_constant([1], "float32", 1.0)
    return main


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy's 0 * inf, meant
@pytest.mark.parametrize("kind,padding,exclusive", [("max", 0, True), ("max", 1, True), ("avg", 1, True),
                                                    ("avg", 1, False)])
@pytest.mark.parametrize("trouble", ["ties", "nan input", "inf gradient"])
def test_pooling_and_its_gradient_equal_numpys_with_ties_nan_and_inf(kind, padding, exclusive, trouble):
    """Which maximum takes a window's gradient on ties, a NaN input, an infinite gradient spread over a max window
    (0 * inf), padded windows: all as the numpy kernels have them."""
    need_torch()
    from gradgen.program import Program, layers, program_guard
    from gradgen.framework import gradients
    rng = np.random.default_rng(3)
    x_value = np.round(rng.standard_normal((2, 3, 6, 6)))  # few distinct values: ties in most windows
    g_value = rng.standard_normal((2, 3, 3 + padding, 3 + padding))
    if trouble == "nan input":
        x_value[0, 1, 2, 3] = np.nan
    if trouble == "inf gradient":
        g_value[1, 2, 1, 1] = np.inf
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, 6, 6], "float64")
        g = layers.data("g", list(g_value.shape), "float64")
        out = layers.pool2d(x, 2, kind, stride=2, padding=padding, exclusive=exclusive)
        (x_grad,) = gradients([layers.reduce_sum(out * g)], [x])
    feed = {"x": x_value, "g": g_value}
    want = run_on("numpy", main, feed, [out, x_grad])
    got = run_on("torch", main, feed, [out, x_grad])
    assert_same(want, got, ["out", "x@GRAD"], f"{kind} {trouble}")


def test_threads_are_set_for_the_run_and_put_back(monkeypatch):
    """``Executor(threads=1)``: the kernels run with one torch thread, and torch's own count is back after the run."""
    need_torch()
    import torch

    import gradgen.framework.backend.torch.walk as walk
    from gradgen.program import Program, layers, program_guard
    main = Program()
    with program_guard(main, Program()):
        out = layers.scale(layers.data("x", [2], "float64"), 2.0)
    seen, scale = [], walk.KERNELS["scale"]

    def spying(op):  # the count a kernel runs with
        run = scale(op)
        return lambda *xs: (seen.append(torch.get_num_threads()), run(*xs))[1]

    monkeypatch.setattr(walk, "KERNELS", {**walk.KERNELS, "scale": spying})
    before = torch.get_num_threads()
    (got,) = Executor(backend="torch", threads=1).run(main, feed={"x": np.array([1.0, 2.0])}, fetch_list=[out],
                                                      scope=Scope())
    np.testing.assert_array_equal(got, [2.0, 4.0])
    assert seen == [1] and torch.get_num_threads() == before


def test_the_engine_imported_beside_a_numpy_run_keeps_torchs_thread_count():
    """``backend="auto"`` imports the engine in a background thread while its numpy runs hold the BLAS pools at one
    thread (a preparation counts as a core taken). On a 2-core Intel Xeon with MKL's count set for the whole process,
    that thread's first question to torch answered MKL's 1, and the engine ran every later run at one thread; MKL's
    count is now the run's thread's own (``numpy/threads._pools``). A fresh process does what auto does, with MKL
    asked for (where the mkl wheel is missing, numpy's OpenBLAS answers)."""
    need_torch()
    code = ("import threading\n"
            "from gradgen.framework.backend.numpy.threads import blas_threads\n"
            "with blas_threads(1):\n"
            "    t = threading.Thread(target=__import__, args=('gradgen.framework.backend.torch.runner',))\n"
            "    t.start(); t.join()\n"
            "import torch\n"
            "from gradgen.framework.backend.torch import runner\n"
            "print(torch.get_num_threads(), runner._OWN_THREADS)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GRADGEN_BLAS": "mkl"})
    assert done.returncode == 0, done.stderr
    torch_count, own = map(int, done.stdout.split())
    assert own == torch_count


def test_executor_weighs_the_torch_engine_by_itself(monkeypatch):
    """With torch installed, Executor() is auto, whose trial includes the torch engine (tests/backends/
    test_auto_three.py); a GPU place still goes to xla."""
    from gradgen.framework import backend
    from gradgen.framework.runtime.place import CPUPlace, CUDAPlace
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    monkeypatch.setattr(backend, "backends", lambda: ["numpy", "torch"])
    assert backend.NOT_BY_DEFAULT == () and backend.default_backend(CPUPlace()) == "auto"
    monkeypatch.setattr(backend, "backends", lambda: ["numpy", "xla", "torch"])
    assert backend.default_backend(CUDAPlace(0)) == "xla"


def conv_and_its_gradients(size: int, dtype: str):
    """A padded 3x3 convolution of x [2, 3, size, size] into 4 channels (filter ``k.w``, no bias), and the gradients
    of sum(out * g) in x and in the filter: (program, out, [x@GRAD, k.w@GRAD])."""
    from gradgen.framework import gradients
    from gradgen.program import Program, layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, size, size], dtype)
        g = layers.data("g", [2, 4, size, size], dtype)
        out = layers.conv2d(x, 4, 3, padding=1, bias=False, name="k")
        grads = gradients([layers.reduce_sum(out * g)], [x, main.global_block().var("k.w")])
    return main, out, grads


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy's 0 * inf, meant
@pytest.mark.parametrize("where", ["input", "gradient"])
def test_a_padded_convolution_with_an_infinite_operand_gives_numpys_nan(where):
    """oneDNN never multiplies the padding it leaves implicit; numpy's padded columns meet an infinite operand as
    0 * inf = NaN (float32: torch runs float64 convolutions through its own padded columns). Found by random programs
    (a filter gradient inf where numpy has NaN). (An infinite filter is
    left out: numpy's stride-1 input gradient widens the output gradient with zeros, which makes NaN in a column
    no product of real values reaches; the torch engine does not follow that.)"""
    need_torch()
    rng = np.random.default_rng(5)
    x_value = rng.standard_normal((2, 3, 5, 5)).astype("float32")
    w_value = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    g_value = rng.standard_normal((2, 4, 5, 5)).astype("float32")
    {"input": x_value, "filter": w_value, "gradient": g_value}[where][0, 1, 0, 0] = np.inf
    main, out, grads = conv_and_its_gradients(5, "float32")
    feed, fetch = {"x": x_value, "g": g_value}, [out, *grads]
    want = run_on("numpy", main, feed, fetch, {"k.w": w_value})
    got = run_on("torch", main, feed, fetch, {"k.w": w_value})
    assert_same(want, got, ["out", "x@GRAD", "w@GRAD"], where)
    assert any(not np.isfinite(v).all() for v in want)  # the case the test is about


def test_random_single_pieces_without_control_flow_equal_numpys():
    """A sample of the differential test's random programs, one piece each (a wider sweep: seeds 0-699, 478 such
    programs on this branch, all equal; design_docs/backends.md)."""
    need_torch()
    from tests.differential.compare import initial_values, mismatches, run_on as run_built
    from tests.differential.random_programs import build
    ran, reports = 0, []
    for seed in range(150, 200):  # seed 159: the padded convolution meeting an infinite gradient
        built = build(seed, 1)
        if any(op.type in ("while", "cond") for b in built.main.blocks for op in b.ops):
            continue
        initial = initial_values(built)
        found = mismatches(built, run_built("numpy", built, initial), run_built("torch", built, initial))
        ran += 1
        reports += [f"seed {seed}: " + "; ".join(found[:3])] if found else []
    assert ran >= 20 and not reports, reports


def test_the_design_doc_names_every_op_type_the_torch_engine_refuses():
    """backends.md's counts of the op types the engine runs (and derives) and its lists of those it refuses and of
    those it keeps a kernel for beside their compute follow the kernels."""
    import re
    from pathlib import Path

    need_torch()
    from gradgen.framework.backend.torch import KERNELS
    from gradgen.framework.backend.torch.kernels import FASTER
    from gradgen.program.ops import OP_SCHEMAS

    doc = (Path(__file__).resolve().parents[2] / "design_docs" / "backends.md").read_text(encoding="utf-8")
    refused = sorted(t for t in OP_SCHEMAS if t not in KERNELS)
    computed = [t for t, schema in OP_SCHEMAS.items() if schema.compute is not None]
    runs = doc[doc.index("**What it runs.**"):doc.index("Pooling is the pooling ops' computes")]
    assert (f"**What it runs.** {len(OP_SCHEMAS) - len(refused)} of the {len(OP_SCHEMAS)} op types: the "
            f"{len(computed)} with a `compute`, {len(computed) - len(FASTER)} of them derived") in runs
    by_hand = runs[runs.index("by hand"):]
    assert not [t for t in FASTER if f"`{t}`" not in by_hand], sorted(FASTER)
    start = doc.index("**Refused**")
    paragraph = doc[start:doc.index("any place but the CPU", start)]
    assert f"the {len(refused)} op types without a kernel" in paragraph
    named = set(re.findall(r"`([a-z_0-9]+)`", paragraph))
    missing = [t for t in refused if t not in named and t.rsplit("_", 1)[0] not in named]
    assert not missing and not named & set(KERNELS), (missing, named & set(KERNELS))


def test_a_joint_kernels_wrong_output_names_the_op_that_writes_it(monkeypatch):
    """A joint kernel (a convolution's input and filter gradients in one call) whose second output has the wrong
    dtype: the error names the second op, the one that writes that output, not the step's first."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch import walk
    from tests.framework.test_profile import _two_convs

    pair = ("conv2d_input_grad", "conv2d_filter_grad")
    made = walk.JOINT[pair]

    def wrong_filter_grad(op, other):
        run = made(op, other)
        return lambda *xs: (lambda dx, dw: (dx, dw.to(torch.float64)))(*run(*xs))

    monkeypatch.setitem(walk.JOINT, pair, wrong_filter_grad)
    main, startup, loss, feed = _two_convs()
    exe, scope = Executor(backend="torch"), Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(ExecutionError, match=r"op #\d+ \(conv2d_filter_grad\).*output '.*@GRAD' is torch\.float64"):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
