"""The tensor and optimizer families on the xla backend where the shared kernel cases say nothing: indexes out
of range (XLA would clamp them silently; the lowerings must refuse them as numpy does), empty axes, negative
indexes, ties and NaNs in argmax/argmin/top_k, float16 rounding in clip_by_global_norm, and training dropout's
masks (drawn on the host: the numpy backend's, run after run)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from gradgen.program import Program
from tests.backends.xla_harness import assert_same, need_jax, run_both
from tests.framework.op_harness import Case, one_op_program

rng = np.random.default_rng(7)
I64 = np.int64


def _x(*shape):
    return rng.standard_normal(shape)


def _run_case(case: Case):
    need_jax()
    main, op, feed = one_op_program(case)
    fetch = [n for names in op.outputs.values() for n in names]
    return run_both(main, feed, fetch), fetch


REFUSED = [  # (case, what the xla error must say)
    (Case("gather", {"X": _x(3, 2), "Index": np.array([0, 3], I64)}, None), "out of bounds"),
    (Case("gather", {"X": _x(3, 2), "Index": np.array([-4], I64)}, None), "out of bounds"),
    (Case("gather_grad", {"X": _x(2, 3), "Index": np.array([1, 3], I64), "Out@GRAD": _x(2, 2)}, None,
          {"axis": 1}), "out of bounds"),
    (Case("scatter", {"X": _x(4, 3), "Index": np.array([1, 4], I64), "Updates": _x(2, 3)}, None), "out of bounds"),
    (Case("scatter", {"X": _x(4, 3), "Index": np.array([1, -3], I64), "Updates": _x(2, 3)}, None),
     "more than once"),
    (Case("scatter_add", {"X": _x(4, 3), "Index": np.array([-5], I64), "Updates": _x(1, 3)}, None),
     "out of bounds"),
    (Case("take_along_axis", {"X": _x(2, 4), "Index": np.array([[0], [4]], I64)}, None, {"axis": 1}),
     "out of bounds"),
    (Case("take_along_axis_grad", {"X": _x(2, 4), "Index": np.array([[0], [-5]], I64), "Out@GRAD": _x(2, 1)},
          None, {"axis": 1}), "out of bounds"),
    (Case("lookup_table", {"W": _x(5, 3), "Ids": np.array([[0, 5]], I64)}, None), "outside [0, 5)"),
    (Case("lookup_table", {"W": _x(5, 3), "Ids": np.array([-1], I64)}, None), "outside [0, 5)"),
    (Case("gather", {"X": _x(0, 2), "Index": np.array([0], I64)}, None), "out of bounds"),
    (Case("take_along_axis", {"X": _x(2, 0), "Index": np.zeros((2, 1), I64)}, None, {"axis": 1}), "out of bounds"),
    (Case("lookup_table", {"W": _x(0, 3), "Ids": np.array([0], I64)}, None), "outside [0, 0)"),
]


@pytest.mark.parametrize("case,says", REFUSED, ids=[c.id + f"-{k}" for k, (c, _) in enumerate(REFUSED)])
def test_an_index_numpy_refuses_is_refused_naming_the_op(case, says):
    (want, got), _ = _run_case(case)
    assert isinstance(want, ExecutionError), f"numpy ran {case.id}"
    assert isinstance(got, ExecutionError), f"xla ran {case.id}: {got}"
    assert f"({case.op})" in str(got) and says in str(got), str(got)


ANSWERED = [
    Case("gather", {"X": _x(0, 2), "Index": np.zeros((0,), I64)}, None, label="empty axis, no index"),
    Case("take_along_axis", {"X": _x(2, 0), "Index": np.zeros((2, 0), I64)}, None, {"axis": 1},
         label="empty axis, no index"),
    Case("gather", {"X": _x(3, 2), "Index": np.array([[-1, 2], [-3, 0]], I64)}, None, label="negative"),
    Case("gather", {"X": _x(2, 3), "Index": np.array(-2, I64)}, None, {"axis": -1}, label="scalar index"),
    Case("gather_grad", {"X": _x(2, 3), "Index": np.array([-1, 2, -1], I64), "Out@GRAD": _x(2, 3)}, None,
         {"axis": 1}, label="negative repeated"),
    Case("scatter", {"X": _x(4, 3), "Index": np.array([-1, 0], I64), "Updates": _x(2, 3)}, None, label="negative"),
    Case("take_along_axis_grad", {"X": _x(2, 4), "Index": np.array([[-1, 3], [0, -4]], I64), "Out@GRAD": _x(2, 2)},
         None, {"axis": 1}, label="negative repeated"),
    Case("argmax", {"X": np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, 1.0, 2.0]])}, None, {"axis": 1},
         label="nan,ties"),
    Case("argmin", {"X": np.array([[1.0, 0.0, 0.0], [np.nan, -1.0, np.nan]])}, None, {"axis": -1, "keep_dim": True},
         label="nan,ties"),
    Case("argmax", {"X": np.array(2.5)}, None, {"axis": 0}, label="scalar"),
    Case("argmin", {"X": np.array(-2.5)}, None, {"axis": 0}, label="scalar"),
    Case("argmax", {"X": np.array(2.5)}, None, {"axis": 0, "keep_dim": True}, label="scalar keep_dim"),
    Case("argmin", {"X": np.array(-2.5)}, None, {"axis": 0, "keep_dim": True}, label="scalar keep_dim"),
    Case("top_k", {"X": np.array([[1.0, np.nan, 3.0, 3.0, -np.inf]])}, None, {"k": 4}, label="nan,ties,largest"),
    Case("top_k", {"X": np.array([[1.0, np.nan, 3.0, 3.0, -np.inf]])}, None, {"k": 4, "largest": False},
         label="nan,ties,smallest"),
    Case("cumsum", {"X": _x(3, 4)}, None, {"axis": 0, "exclusive": True, "reverse": True}, label="exclusive,reverse"),
    # numpy scales by a float64 and rounds once: scaling by the scale rounded to float16 is an ulp off here
    Case("clip_by_global_norm", {"X": [np.float32(1.0), np.array([-1.5, -3, -3], np.float16), np.float16(2.0)]},
         None, {"max_norm": 1.0}, n_outputs={"Out": 3}, label="float16, one rounding"),
]


@pytest.mark.parametrize("case", ANSWERED, ids=lambda c: c.id)
def test_negative_indexes_ties_and_nans_give_numpys_answer(case):
    (want, got), fetch = _run_case(case)
    assert not isinstance(want, Exception), f"numpy refused {case.id}: {want}"
    assert_same(want, got, fetch, case.id)


def _dropout_program(dtype: str, p: float, seed: int):
    main = Program()
    block = main.global_block()
    block.create_var("x", (-1, 5), dtype)
    block.append_op("dropout", {"X": ["x"]}, {"Out": ["out"], "Mask": ["mask"]}, {"p": p, "seed": seed})
    return main


@pytest.mark.parametrize("engine", ["xla", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_training_dropout_draws_the_numpy_backends_masks_run_after_run(dtype, engine):
    """On xla (a host callback) and on torch (the kernel draws on the host) alike."""
    from tests.backends.test_torch_backend import need_torch

    (need_jax if engine == "xla" else need_torch)()
    main = _dropout_program(dtype, p=0.3, seed=11)
    x = rng.uniform(1.0, 2.0, (6, 5)).astype(dtype)
    runs = {}
    for backend in ("numpy", engine):
        exe, scope = Executor(backend=backend), Scope()
        runs[backend] = [exe.run(main, feed={"x": x}, fetch_list=["out", "mask"], scope=scope) for _ in range(4)]
    masks = [mask for _, mask in runs["numpy"]]
    assert len({m.tobytes() for m in masks}) == 4, "the stream should give a new mask every run"
    for (out, mask), (want_out, want_mask) in zip(runs[engine], runs["numpy"]):
        assert mask.dtype == want_mask.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(mask, want_mask)
        np.testing.assert_array_equal(out, want_out)
