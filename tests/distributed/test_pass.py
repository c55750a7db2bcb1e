"""The data-parallel pass and its helpers in one process: where the collective ops go, what they compute with a
world of one, how feeds are sharded, and the errors. The multi-process runs are in test_mpi.py."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gradgen.framework import DistributedError, Executor, Scope, data_parallel, optimizer, shard_feed
from gradgen.framework.distributed import shard
from gradgen.framework.runtime import communicator as comm_module
from gradgen.framework.runtime.communicator import Solo, init_parallel
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import OpError

from .cases import CASES, build, train
from .launch import ROOT


@pytest.fixture(autouse=True)
def solo():
    """Every test here runs in a world of one, whether or not mpi4py is installed."""
    init_parallel(Solo())
    yield
    comm_module._current.clear()


def _types(program):
    return [op.type for op in program.global_block().ops]


def _normwise(got, ref):
    return max(float(np.max(np.abs(got[k] - ref[k]))) / max(float(np.max(np.abs(ref[k]))), 1e-300)
               for k in ref if ref[k].size)


def test_small_buckets_hold_one_gradient_each_in_the_order_backward_makes_them():
    main, startup, _, _ = build("mlp-sgd", parallel=False)
    buckets = data_parallel(main, startup, bucket_bytes=1, average=False)
    assert [b.grads for b in buckets] == [("w2@GRAD",), ("w1@GRAD",)]
    assert [b.nbytes for b in buckets] == [100 * 10 * 8, 1000 * 100 * 8]
    ops = main.global_block().ops
    for b in buckets:
        start, wait = ops[b.start], ops[b.wait]
        assert start.type == "allreduce_start" and start.input("X") == list(b.grads)
        assert wait.type == "allreduce_wait" and wait.output("Out") == list(b.grads) == wait.input("X")
        assert wait.input("Buffer") == start.output("Out") == [b.buffer]
        assert start.role == wait.role == "backward" and wait.attr("average") is False
        # The start comes right after the op that makes its last gradient; the wait right before the first reader.
        assert b.grads[-1] in ops[b.start - 1].output_arg_names
        assert any(g in ops[b.wait + 1].input_arg_names for g in b.grads)
        assert not any(g in op.input_arg_names for op in ops[b.start + 1:b.wait] for g in b.grads)


def test_a_large_bucket_holds_every_gradient_and_starts_after_the_last():
    main, startup, _, _ = build("cnn-adam", parallel=False)
    (bucket,) = data_parallel(main, startup)
    assert set(bucket.grads) == {"conv.w@GRAD", "conv.b@GRAD", "out.w@GRAD", "out.b@GRAD"}
    assert bucket.nbytes == 8 * (4 * 1 * 3 * 3 + 4 + 64 * 2 + 2)
    assert main.global_block().var(bucket.buffer).shape == (bucket.nbytes // 8,)


def test_block_order_overlaps_the_first_bucket_with_the_rest_of_backward_and_updates_wait():
    main, startup, _, _ = build("mlp-adam", parallel=False)
    first, second = data_parallel(main, startup, bucket_bytes=1, average=False)
    ops = main.global_block().ops
    at = {i: i for i in range(len(ops))}  # the numpy engine runs the block as written
    # w1's gradient product runs after w2's bucket has started and before it is waited on.
    w1_product = next(i for i, op in enumerate(ops) if "w1@GRAD" in op.output("Out") and op.type == "matmul")
    assert at[first.start] < at[w1_product] < at[first.wait]
    for i, op in enumerate(ops):
        if op.role == "optimize":
            for b in (first, second):
                if set(b.grads) & set(op.input_arg_names):
                    assert at[i] > at[b.wait]


def test_the_ops_print_save_and_load_like_any_other():
    main, startup, loss, model = build("cnn-adam-clip", parallel=True)
    text = str(main)
    assert "= allreduce_start(X=" in text and "= allreduce_wait(Buffer=allreduce@bucket_0" in text
    assert "= broadcast(X=[" in str(startup)
    again, again_startup = Program.from_json(main.to_json()), Program.from_json(startup.to_json())
    assert again.to_json() == main.to_json()
    results = []
    for m, s in ((main, startup), (again, again_startup)):
        exe, scope = Executor(check_types=True), Scope()
        exe.run(s, scope=scope)
        results.append(exe.run(m, feed=model.data(0), fetch_list=[loss.name], scope=scope)[0])
    assert results[0] == results[1]


@pytest.mark.parametrize("case", CASES)
def test_one_rank_trains_as_the_program_without_the_pass(case):
    ref = train(case, parallel=False, steps=3)
    got = train(case, parallel=True, steps=3)
    assert set(got) == set(ref)
    assert _normwise(got, ref) <= 1e-12


def test_each_rank_alone_would_train_differently():
    """The equality tests can fail: training on one shard without the reduction is far from the whole batch."""
    ref = train("cnn-sgd", parallel=False, steps=3)
    half = Solo()
    half.rank, half.size = 0, 2  # shards as rank 0 of 2, but reduces over a world of one
    main, startup, loss, model = build("cnn-sgd", parallel=True)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for step in range(3):
        exe.run(main, feed=shard_feed(model.data(step), half), fetch_list=[loss], scope=scope)
    assert float(np.max(np.abs(np.array(scope["out.w"]) - ref["out.w"]))) > 1e-6


def test_pass_errors_name_what_is_wrong():
    main, startup, _, _ = build("mlp-sgd", parallel=False)
    with pytest.raises(DistributedError, match="bucket_bytes must be positive"):
        data_parallel(main, bucket_bytes=0)
    with pytest.raises(DistributedError, match="fully known shape") as e:
        data_parallel(main, grads=["h@GRAD"])  # an activation gradient: [-1, 100]
    assert "block 0, op #" in str(e.value) and "h@GRAD: float64[-1, 100]" in str(e.value)
    with pytest.raises(DistributedError, match="'nope' is not made by any op"):
        data_parallel(main, grads=["nope"])
    data_parallel(main)
    with pytest.raises(DistributedError, match=r"op #\d+ \(allreduce_start\).*applies once"):
        data_parallel(main)
    plain = Program()
    with program_guard(plain, Program()):
        layers.reduce_sum(layers.data("x", [3], "float64"))
    with pytest.raises(DistributedError, match="no gradient to all-reduce"):
        data_parallel(plain)


def test_collective_schemas_check_their_inputs():
    program = Program()
    block = program.global_block()
    with program_guard(program, Program()):
        a = layers.data("a", [-1, 3], "float64")
        b = layers.data("b", [2], "float32")
        c = layers.data("c", [2], "float64")
    with pytest.raises(OpError, match="fully known shape"):
        block.append_op("allreduce_start", {"X": [a.name]}, {"Out": ["f0"]})
    with pytest.raises(OpError, match="one dtype"):
        block.append_op("allreduce_start", {"X": [b.name, c.name]}, {"Out": ["f1"]})
    block.append_op("allreduce_start", {"X": [c.name]}, {"Out": ["f2"]})
    with pytest.raises(OpError, match=r"Buffer must be float64\[4\]"):
        block.append_op("allreduce_wait", {"Buffer": ["f2"], "X": [c.name, c.name]}, {"Out": [c.name, c.name]})
    with pytest.raises(OpError, match="root must be a rank"):
        block.append_op("broadcast", {"X": [c.name]}, {"Out": [c.name]}, {"root": -1})


def test_a_wait_without_its_start_is_an_error():
    program = Program()
    with program_guard(program, Program()):
        c = layers.data("c", [2], "float64")
        flat = layers.data("flat", [2], "float64")
    program.global_block().append_op("allreduce_wait", {"Buffer": [flat.name], "X": [c.name]}, {"Out": [c.name]})
    with pytest.raises(Exception, match="not the output of an allreduce_start that is still in flight"):
        Executor().run(program, feed={"c": np.ones(2), "flat": np.ones(2)}, fetch_list=[c])


def test_shards_concatenate_to_the_batch():
    batch = {"x": np.arange(24.0).reshape(8, 3), "seq": np.arange(48.0).reshape(2, 8, 3), "T": np.array(5)}
    parts = []
    for rank in range(4):
        comm = Solo()
        comm.rank, comm.size = rank, 4
        parts.append(shard_feed(batch, comm, {"seq": 1}))
    assert all(p["x"].shape == (2, 3) and p["seq"].shape == (2, 2, 3) and p["T"] == 5 for p in parts)
    np.testing.assert_array_equal(np.concatenate([p["x"] for p in parts]), batch["x"])
    np.testing.assert_array_equal(np.concatenate([p["seq"] for p in parts], axis=1), batch["seq"])
    assert shard("x", batch["x"], 0, 1) is batch["x"]


def test_shard_errors():
    with pytest.raises(DistributedError, match="feed 'x' has 5 rows on axis 0 .* over 2 ranks"):
        shard("x", np.zeros((5, 2)), 0, 2)
    with pytest.raises(DistributedError, match="no batch axis 3"):
        shard("x", np.zeros((4, 2)), 0, 2, axis=3)
    with pytest.raises(DistributedError, match="not fed: y"):
        shard_feed({"x": np.zeros(4)}, Solo(), {"y": 1})


def test_without_mpi4py_a_process_mpiexec_started_refuses_to_train_alone(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now fails
    monkeypatch.setenv("PMI_SIZE", "4")
    with pytest.raises(DistributedError, match="one of 4 that mpiexec started, but mpi4py is not installed"):
        comm_module._world()
    monkeypatch.setenv("PMI_SIZE", "1")
    assert isinstance(comm_module._world(), Solo)


def test_solo_broadcast_copies_and_knows_only_rank_zero():
    x = np.arange(3.0)
    y = Solo().broadcast(x, 0)
    assert y is not x and np.array_equal(x, y)
    with pytest.raises(DistributedError, match="broadcast from rank 1"):
        Solo().broadcast(x, 1)


def test_gradgen_trains_a_data_parallel_program_without_mpi4py(tmp_path):
    """mpi4py is optional: without it the communicator is a world of one and the program still runs."""
    code = ("import sys\nsys.modules['mpi4py'] = None\n"
            "from tests.distributed.cases import train, build\n"
            "from gradgen.framework import communicator\n"
            "values = train('mlp-sgd', parallel=True, steps=2)\n"
            "print(type(communicator()).__name__, sorted(values))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_LOCAL"))}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "Solo" and "'w1'" in result.stdout


def _fixed_batch_program():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [4, 3], "float64")
        w1 = layers.create_parameter([3, 5], "float64", name="w1")
        w2 = layers.create_parameter([5, 2], "float32", name="w2")
        h = layers.relu(x @ w1, name="h")
        out = layers.cast(h, "float32") @ w2
        loss = layers.reduce_sum(out)
    return main, startup, loss


def test_gradients_of_different_dtypes_travel_in_different_buckets():
    main, startup, loss = _fixed_batch_program()
    with program_guard(main, startup):
        optimizer.SGD(0.1).minimize(loss)
    buckets = data_parallel(main, startup)
    assert sorted((b.grads, main.global_block().var(b.buffer).dtype) for b in buckets) == [
        (("w1@GRAD",), "float64"), (("w2@GRAD",), "float32")]


def test_a_bucket_closes_before_a_gradient_made_after_another_is_needed():
    """h@GRAD is read by the op that makes w1@GRAD: one bucket for both would start after its own reader."""
    main, startup, loss = _fixed_batch_program()
    with program_guard(main, startup):
        optimizer.SGD(0.1).minimize(loss)
    buckets = data_parallel(main, grads=["h@GRAD", "w1@GRAD"])
    assert [b.grads for b in buckets] == [("h@GRAD",), ("w1@GRAD",)]
    ops = main.global_block().ops
    for b in buckets:
        assert b.start < b.wait
        assert not any(g in op.input_arg_names for op in ops[b.start + 1:b.wait] for g in b.grads)
