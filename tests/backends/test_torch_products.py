"""The torch engine's matrix product (``backend/torch/kernels/linalg.py``): torch's own product where it measured
faster and every value is finite, numpy's elsewhere; the reference's values either way, special values included."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.backends.test_torch_backend import need_torch, run_on
from tests.backends.xla_harness import assert_same
from tests.framework.op_harness import Case, one_op_program

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # (IEEE values are the semantics, not warnings)

SPECIALS = (0.0, np.inf, -np.inf, np.nan, 1e30)

SHAPES = {
    "2-D": ((7, 5), (5, 3), {}),
    "3-D by 2-D": ((2, 7, 5), (5, 3), {}),
    "batched": ((2, 4, 5), (2, 5, 3), {}),
    "broadcast batch": ((2, 1, 4, 5), (3, 5, 6), {}),
    "transposed": ((5, 7), (3, 5), {"transpose_x": True, "transpose_y": True}),
    "vector by matrix": ((5,), (5, 3), {}),
    "matrix by vector": ((7, 5), (5,), {}),
    "empty rows": ((0, 5), (5, 3), {}),
    "empty inner": ((4, 0), (0, 3), {}),
}


@pytest.fixture
def torch_products(monkeypatch):
    """The engine as on a machine where torch's product measured faster, counting the products torch made."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import linalg

    made = []
    own = torch.matmul
    monkeypatch.setattr(linalg, "torch_is_faster", lambda threads: True)
    monkeypatch.setattr(linalg.torch, "matmul", lambda a, b: made.append(1) or own(a, b))
    return made


def _product_case(shape: str, dtype: str, special: float | None, rng: np.random.Generator) -> Case:
    x_shape, y_shape, attrs = SHAPES[shape]
    x, y = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(y_shape).astype(dtype)
    if special is not None and x.size:
        x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // 5))] = special
        y.reshape(-1)[rng.integers(0, y.size, max(1, y.size // 5))] = special if special != 1e30 else -1e30
    return Case("matmul", {"X": x, "Y": y}, None, {"transpose_x": False, "transpose_y": False, **attrs},
                label=f"{shape} {special}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("special", [None, *SPECIALS])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_product_equals_the_reference_on_every_value(torch_products, shape, dtype, special):
    rng = np.random.default_rng(zlib.crc32(f"{shape} {dtype} {special}".encode()))
    for _ in range(3):
        case = _product_case(shape, dtype, special, rng)
        main, op, feed = one_op_program(case)
        fetch = op.output("Out")
        want = run_on("numpy", main, feed, fetch)
        got = run_on("torch", main, feed, fetch)
        assert not isinstance(want, Exception), want
        assert_same(want, got, fetch, f"{case.op} {case.label} {dtype}")


def test_only_finite_nonempty_floats_keep_torchs_product(torch_products, monkeypatch):
    """A product of finite floats is torch's; one with an infinity or a NaN is numpy's (torch's may be made first
    and dropped, where the product is the smaller to sum); an empty or integer one never reaches torch."""
    from gradgen.framework.backend.torch.kernels import linalg

    by_numpy, own = [], linalg._numpy_product
    monkeypatch.setattr(linalg, "_numpy_product", lambda a, b: by_numpy.append(1) or own(a, b))
    rng = np.random.default_rng(5)
    for shape, special, dtype, kept in [("2-D", None, "float32", True), ("batched", None, "float64", True),
                                        ("2-D", np.inf, "float32", False), ("2-D", np.nan, "float64", False),
                                        ("vector by matrix", -np.inf, "float32", False),
                                        ("empty rows", None, "float32", False)]:
        torch_products.clear(), by_numpy.clear()
        main, op, feed = one_op_program(_product_case(shape, dtype, special, rng))
        run_on("torch", main, feed, op.output("Out"))
        assert (by_numpy == []) == kept and len(torch_products) <= 1, (shape, special, dtype)
    torch_products.clear()
    main, op, feed = one_op_program(Case("matmul", {"X": np.ones((3, 4), np.int64), "Y": np.ones((4, 2), np.int64)},
                                         None, {"transpose_x": False, "transpose_y": False}))
    assert np.array_equal(run_on("torch", main, feed, op.output("Out"))[0], np.full((3, 2), 4))
    assert torch_products == []


@pytest.mark.parametrize("sizes, summed", [((64, 1000, 100), [(64, 100)]),  # the product is the smaller
                                           ((64, 10, 100), [(64, 10), (10, 100)])])  # the operands are
def test_the_smaller_side_of_a_product_is_summed(torch_products, monkeypatch, sizes, summed):
    """Summing the product after it is made, where it is smaller than its operands, proves them finite too: the
    next product reading them sums nothing more."""
    import torch

    from gradgen.framework.backend.torch.kernels import finite
    from gradgen.program import Program, layers, program_guard

    m, k, n = sizes
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, k], "float32")
        w = layers.data("w", [k, n], "float32")
        first, second = x @ w, x @ w
    sums, own = [], torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t: sums.append(tuple(t.shape)) or own(t))
    rng = np.random.default_rng(4)
    feed = {"x": rng.standard_normal((m, k)).astype("float32"), "w": rng.standard_normal((k, n)).astype("float32")}
    fetch = [first.name, second.name]
    want, got = run_on("numpy", main, feed, fetch), run_on("torch", main, feed, fetch)
    assert not isinstance(got, Exception), got
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())  # (sums of 1000 terms)
    assert sorted(sums) == sorted(summed) and len(torch_products) == 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torchs_product_of_a_nonfinite_operand_is_never_all_finite(dtype):
    """What the product's check after it rests on, held against the installed torch's own product (MKL or
    another BLAS): an infinity or a NaN anywhere in either operand leaves a non-finite value in the product, at the
    shapes its blocked kernels take too, whatever the other values (zeros included)."""
    need_torch()
    import torch

    rng = np.random.default_rng(11)
    shapes = [(7, 5, 3), (64, 1000, 100), (100, 64, 1000), (33, 65, 17), (1, 300, 1), (256, 256, 256)]
    for trial in range(60):
        m, k, n = shapes[trial % len(shapes)]
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        if trial % 3 == 0:
            b[rng.random(b.shape) < 0.5] = 0.0
        target = a if trial % 2 else b
        target.reshape(-1)[rng.integers(target.size)] = (np.inf, -np.inf, np.nan)[trial % 3]
        tx, ty = torch.from_numpy(a), torch.from_numpy(b)
        assert not bool(torch.isfinite(torch.matmul(tx, ty)).all()), (m, k, n, trial)
        assert not bool(torch.isfinite(torch.matmul(ty.T, tx.T)).all()), (m, k, n, trial)  # (transposed operands)


def test_the_faster_product_is_measured_once_per_thread_count(monkeypatch):
    need_torch()
    from gradgen.framework.backend.torch.kernels import linalg

    monkeypatch.setattr(linalg, "_faster", {})
    timings = iter([(2.0, 1.0), (1.0, 2.0)])  # (numpy, torch), for one thread count and then another
    timed, waited = [], []
    monkeypatch.setattr(linalg, "_best_pair", lambda a, b: timed.append(len(waited)) or next(timings))
    monkeypatch.setattr(linalg.time, "sleep", waited.append)
    assert linalg.torch_is_faster(2) is True and linalg.torch_is_faster(2) is True
    assert linalg.torch_is_faster(1) is False and linalg.torch_is_faster(1) is False
    assert timed == [1, 2]  # each timing after its own wait for the pools that may still spin
    assert waited == [linalg._POOLS_SETTLE_SECONDS] * 2 and linalg._POOLS_SETTLE_SECONDS >= 0.1


def test_a_close_call_at_two_threads_is_timed_again(monkeypatch):
    """A calibration that met torch's threads with a core taken looks like a tie or numpy ahead: at two threads the
    products are timed again, each side keeping its fastest, until torch's is clearly ahead or ``_CALIBRATIONS``
    are taken; at one thread (where the two products are equal on this machine) a tie is kept as it is."""
    need_torch()
    from gradgen.framework.backend.torch.kernels import linalg

    def calibrate(threads, timings):
        monkeypatch.setattr(linalg, "_faster", {})
        pairs, waited = iter(timings), []
        monkeypatch.setattr(linalg, "_best_pair", lambda a, b: next(pairs))
        monkeypatch.setattr(linalg.time, "sleep", waited.append)
        faster = linalg.torch_is_faster(threads)
        return faster, len(waited), next(pairs, None)

    # torch at one thread's speed first (a tie, numpy ahead), then its two threads: torch, after two timings
    assert calibrate(2, [(1.30, 1.32), (1.35, 0.75), (9.0, 9.0)]) == (True, 2, (9.0, 9.0))
    # still close after four timings: each side's fastest decides (numpy's 1.0 from the first against torch's 1.1)
    assert calibrate(2, [(1.0, 1.2), (1.4, 1.1), (1.3, 1.15), (1.2, 1.12), (9.0, 9.0)]) == (False, 4, (9.0, 9.0))
    assert calibrate(2, [(2.0, 1.0), (9.0, 9.0)]) == (True, 1, (9.0, 9.0))  # clear at once: timed once
    assert calibrate(1, [(1.30, 1.32), (9.0, 9.0)]) == (False, 1, (9.0, 9.0))  # one thread: a tie stands
    # numpy clearly ahead is looked at again too (a taken core slows torch's threads): torch at its second timing
    assert calibrate(2, [(1.3, 1.9), (1.3, 0.7), (9.0, 9.0)]) == (True, 2, (9.0, 9.0))
    # and stands where it holds at every timing (a machine whose numpy product is faster)
    assert calibrate(2, [(1.0, 3.0)] * 4 + [(9.0, 9.0)]) == (False, 4, (9.0, 9.0))


def test_the_calibration_is_one_time_measuring_not_the_runs_time(monkeypatch):
    """``backend="auto"`` times a run less its engine's one-time measuring (``shared/one_time``): the calibration,
    waits included, counts as that, and a product whose thread count is calibrated adds nothing."""
    need_torch()
    from gradgen.framework.backend.shared import one_time
    from gradgen.framework.backend.torch.kernels import linalg

    now = [0.0]
    monkeypatch.setattr(one_time, "_now", lambda: now[0])
    monkeypatch.setattr(linalg, "_faster", {})
    monkeypatch.setattr(linalg.time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    monkeypatch.setattr(linalg, "_best_pair", lambda a, b: now.__setitem__(0, now[0] + 0.02) or (1.3, 0.7))
    before = one_time.spent()
    assert linalg.torch_is_faster(2) is True
    assert one_time.spent() - before == pytest.approx(linalg._POOLS_SETTLE_SECONDS + 0.02)
    assert linalg.torch_is_faster(2) is True  # known now: nothing more measured
    assert one_time.spent() - before == pytest.approx(linalg._POOLS_SETTLE_SECONDS + 0.02)


def test_the_two_products_are_timed_in_turns_and_the_fastest_of_each_kept(monkeypatch):
    """A burst of other work during the calibration slows the runs around it, whichever product they are: in
    turns, both sides meet it; the fastest timing of each side counts."""
    need_torch()
    from gradgen.framework.backend.torch.kernels import linalg

    order, clock = [], [0.0]
    costs = {"numpy": iter([9.0, 3.0, 1.0, 1.5, 2.0, 1.0]), "torch": iter([9.0, 2.0, 0.5, 4.0, 0.7, 0.9])}

    def product(name):
        def run(a, b):
            order.append(name)
            clock[0] += next(costs[name])
        return run

    monkeypatch.setattr(linalg.time, "perf_counter", lambda: clock[0])
    best = linalg._best_pair(None, None, (product("numpy"), product("torch")))
    monkeypatch.undo()
    assert order == ["numpy", "torch"] * 6
    assert best == (1.0, 0.5)


def test_a_run_sums_each_operand_once_and_the_next_run_sums_it_again(torch_products, monkeypatch):
    """``finite.remembered_finite``: ``x`` feeds two products, ``x @ w1`` and ``x @ w2``, and is proved finite once
    in a run: the first product [5, 3] is summed (fewer elements than x and w1, and finite only if they are), then
    w2 alone, not x again. The memory is the run's: a second run with a NaN in ``x`` proves nothing, keeps numpy's
    products and gives the reference's NaN rows."""
    import torch

    from gradgen.framework.backend.torch.kernels import finite, linalg
    from gradgen.program import Program, layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float32")
        w1, w2 = (layers.data(name, [4, 3], "float32") for name in ("w1", "w2"))
        out = x @ w1 + x @ w2
    sums, own = [], torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t: sums.append(tuple(t.shape)) or own(t))
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((5, 4)).astype("float32"), "w1": rng.standard_normal((4, 3)).astype("float32"),
            "w2": rng.standard_normal((4, 3)).astype("float32")}
    run_on("torch", main, feed, [out.name])
    assert sorted(sums) == [(4, 3), (5, 3)] and len(torch_products) == 2
    sums.clear(), torch_products.clear()
    feed["x"][2, 1] = np.nan
    by_numpy, own_numpy = [], linalg._numpy_product
    monkeypatch.setattr(linalg, "_numpy_product", lambda a, b: by_numpy.append(1) or own_numpy(a, b))
    want, got = run_on("numpy", main, feed, [out.name]), run_on("torch", main, feed, [out.name])
    assert sums == [(5, 3), (5, 3)] and len(by_numpy) == 2  # (each product is summed: x is never found finite)
    assert_same(want, got, [out.name], "a NaN in the second run")
    assert np.isnan(got[0][2]).all() and np.isfinite(np.delete(got[0], 2, axis=0)).all()


def test_a_tensor_freed_is_not_taken_for_one_made_at_its_address():
    """Inside ``remembered_finite`` a finite tensor is remembered by id and a weak reference: a NaN tensor made
    after it was freed (often at the same address, so the same id) is summed and found not finite; outside, nothing
    is remembered."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels.finite import all_finite, remembered_finite

    ids = set()
    with remembered_finite():
        for _ in range(50):
            x = torch.ones(8)
            assert all_finite(x) and all_finite(x)
            ids.add(id(x))
            del x
            y = torch.full((8,), float("nan"))
            assert not all_finite(y)
            ids.add(id(y))
            del y
    assert len(ids) < 100  # addresses were reused, the case under test
    assert all_finite(torch.ones(3)) and not all_finite(torch.ones(3), torch.tensor([float("inf")]))


def test_a_view_of_a_tensor_found_finite_is_not_summed_again(monkeypatch):
    """``finite._span``: a reshape or a transpose of a tensor found finite reads the same bytes and is not summed
    again, even once the tensor it views is gone (its storage lives on in the view); a slice or an expanded view
    reads other elements (or some twice) and is summed, an expanded one over its distinct elements alone; a view
    of another dtype's bytes is its own."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import finite

    sums, own = [], torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t: sums.append(tuple(t.shape)) or own(t))
    with finite.remembered_finite():
        x = torch.arange(24, dtype=torch.float64).reshape(4, 6) + 0.5  # (its bits read as float32 are finite too)
        assert finite.all_finite(x) and sums == [(4, 6)]
        rows, turned = x.reshape(24), x.t()
        del x
        assert finite.all_finite(rows, turned, rows.reshape(2, 12).permute(1, 0)) and sums == [(4, 6)]
        assert finite.all_finite(rows[:12], rows.reshape(4, 6)[:, :3]) and sums == [(4, 6), (12,), (4, 3)]
        assert finite.all_finite(rows[:1].expand(24)) and sums[-1] == (1,)
        assert finite.all_finite(rows.view(torch.float32)) and sums[-1] == (48,)


def test_a_storage_freed_is_not_taken_for_one_made_at_its_address():
    """A span is trusted only while the storage found finite lives: a NaN tensor made at a freed one's address
    (the same first byte, size and dtype) is summed and found not finite."""
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels.finite import all_finite, remembered_finite

    addresses, reused = set(), 0
    with remembered_finite():
        for _ in range(50):
            x = torch.ones(1024).reshape(32, 32)
            assert all_finite(x)
            addresses.add(x.data_ptr())
            del x
            y = torch.full((1024,), float("nan"))
            reused += y.data_ptr() in addresses
            assert not all_finite(y) and not all_finite(y.reshape(32, 32))
            del y
    assert reused  # the case under test


def test_softmax_and_relus_gradient_say_their_outputs_are_finite(torch_products, monkeypatch):
    """Attention's weights: the softmax of scores found finite lies in [0, 1], and the product of the weights with
    V sums only V; relu's gradient of finite operands is dOut's values or 0, and the product reading it sums only
    the weight. Against the reference, a NaN score included."""
    import torch

    from gradgen.framework import append_backward
    from gradgen.framework.backend.torch.kernels import finite
    from gradgen.program import Program, layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        scores = layers.data("scores", [-1, 3, 3], "float64")
        v = layers.data("v", [-1, 3, 2], "float64")
        x = layers.data("x", [-1, 4], "float64")
        w = layers.data("w", [4, 5], "float64")
        w.stop_gradient = False
        attended = layers.matmul(layers.softmax(scores, axis=-1), v)
        hidden = layers.relu(layers.matmul(x, w))
        loss = layers.reduce_sum(layers.matmul(hidden, layers.transpose(w, [1, 0])))
        append_backward(loss, parameter_list=[w.name])
    block = main.global_block()
    softmax_out = next(op.output("Out")[0] for op in block.ops if op.type == "softmax")
    relu_dx = next(op.output_arg_names[0] for op in block.ops if op.type == "relu_grad")
    summed = []
    own = finite.torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t, *more, **named: (
        summed.append(t) if not (more or named) else None) or own(t, *more, **named))  # (the program's own sums)
    rng = np.random.default_rng(5)
    feed = {"scores": rng.standard_normal((2, 3, 3)), "v": rng.standard_normal((2, 3, 2)),
            "x": rng.standard_normal((6, 4)), "w": rng.standard_normal((4, 5))}
    fetches = [attended.name, "w@GRAD", softmax_out, relu_dx]
    got = run_on("torch", main, feed, fetches)
    want = run_on("numpy", main, feed, fetches)
    assert_same(want, got, fetches, "finite scores")
    found = {tuple(t.shape) for t in summed}
    assert (2, 3, 3) in found and (6, 5) in found  # the scores, the relu's output and its dOut: summed
    for value in (got[2], got[3]):  # the softmax's output and relu's dX: never summed
        assert not any(t.shape == value.shape and np.array_equal(t.numpy(), value) for t in summed
                       if isinstance(t, torch.Tensor) and t.dtype == torch.float64)
    feed["scores"][1, 2, 0] = np.nan
    assert_same(run_on("numpy", main, feed, fetches), run_on("torch", main, feed, fetches), fetches, "a NaN score")


@pytest.mark.parametrize("values,finite", [
    ([[1.0, 2.0], [3.0]], True),
    ([[1.0, np.inf], [3.0]], False),
    ([[np.nan], [3.0]], False),
    ([[np.inf], [-np.inf]], False),  # one tensor's +inf and another's -inf: their sums add to NaN, still caught
    ([[], [2.0]], True),
    ([[3e38, 3e38], [1.0]], False),  # a float32 sum that overflows: the careful path, which is right too
])
def test_the_finite_check_catches_every_nonfinite_value(values, finite):
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels.finite import all_finite

    tensors = [torch.tensor(v, dtype=torch.float32) for v in values]
    assert all_finite(*tensors, torch.tensor([7], dtype=torch.int64)) is finite


@pytest.mark.parametrize("activation", ["gelu", "sigmoid", "silu"])
def test_an_activation_whose_aten_output_is_finite_is_not_summed_again(activation, monkeypatch):
    """``OpSchema.aten_finite_out``: the product reading gelu's, sigmoid's or silu's output of a finite input does
    not sum it (it sums only the weight); the numbers are the reference's."""
    from gradgen.program.ops.activation import ANY_VALUES
    need_torch()
    import torch

    from gradgen.framework.backend.torch.kernels import finite, linalg
    from gradgen.program import Program, layers, program_guard

    monkeypatch.setattr(linalg, "torch_is_faster", lambda threads: True)
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 40], "float32")
        w = layers.data("w", [40, 3], "float32")
        hidden = getattr(layers, activation)(x)
        out = layers.matmul(hidden, w)
    summed, own = [], torch.sum
    monkeypatch.setattr(finite.torch, "sum", lambda t, *more, **named: (
        summed.append(tuple(t.shape)) if not (more or named) else None) or own(t, *more, **named))
    rng = np.random.default_rng(19)
    feed = {"x": rng.standard_normal((60, 40)).astype("float32") * 3,
            "w": rng.standard_normal((40, 3)).astype("float32")}
    got = run_on("torch", main, feed, [out.name])
    assert_same(run_on("numpy", main, feed, [out.name]), got, [out.name], activation)
    # x (the activation's own check: none for gelu, whose call declines any input not finite) and w (fewer
    # elements than the product's 180); not the activation's output
    assert summed == ([] if activation in ANY_VALUES else [(60, 40)]) + [(40, 3)], summed


@pytest.mark.parametrize("size,stride,dilation,disjoint", [(2, 2, 1, True), (3, 3, 1, True), (3, 1, 1, False),
                                                           (2, 3, 2, True), (2, 2, 2, False)])
def test_a_max_pool_gradient_is_known_finite_only_where_no_two_windows_share_an_element(size, stride, dilation,
                                                                                         disjoint):
    """ATen's max pooling gradient of finite operands: where windows share no element, each element is one of the
    output gradient's or 0, and the next kernel reading it (relu's gradient) need not sum it; where they share
    one, an element sums several, which can overflow (two windows' 2e38 in float32)."""
    need_torch()
    import torch

    from gradgen.framework import gradients
    from gradgen.framework.backend.torch.kernels import KERNELS, finite
    from gradgen.program import Program, layers, program_guard
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [1, 1, 7, 7], "float32")
        out = layers.pool2d(x, size, "max", stride=stride, dilation=dilation)
        gradients([layers.reduce_sum(out)], [x])
    grad = next(op for op in main.global_block().ops if op.type == "pool2d_grad")
    value = torch.zeros(1, 1, 7, 7)
    value[0, 0, 2, 2] = 1.0  # the maximum of every window that holds it
    with finite.remembered_finite():
        dx = KERNELS["pool2d_grad"](grad)(value, torch.ones(tuple(out.shape)))
        assert finite.remembered(dx) == disjoint
    assert (float(dx.max()) == 1.0) == disjoint  # (else the center took several windows' gradients)
