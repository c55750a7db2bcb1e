"""A long block compiled in pieces (backend/xla/pieces.py): the same values as the reference and as one piece,
nothing committed when a later piece fails, compile time that stays linear, and what ``auto`` declines."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import GradgenError
from tests.backends.xla_harness import need_jax

need_jax()

from gradgen.framework.backend.xla import pieces  # noqa: E402
from tests.differential.compare import initial_values, mismatches, run_on  # noqa: E402
from tests.differential.random_programs import build  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mlp(dtype: str = "float64"):
    main_program, startup = Program(), Program()
    with program_guard(main_program, startup):
        x = layers.data("x", [-1, 6], dtype)
        ids = layers.data("ids", [-1, 1], "int64")
        h = layers.tanh(layers.fc(x, 8, name="fc1"))
        h = layers.relu(layers.fc(h, 5, name="fc2")) + layers.reshape(layers.embedding(ids, [4, 5], dtype, name="emb"), [-1, 5])
        loss = layers.reduce_mean(layers.square(h), name="loss")
        optimizer.Momentum(0.1, 0.9).minimize(loss)
    return main_program, startup, loss, h


def _feed(batch: int = 3) -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((batch, 6)), "ids": rng.integers(0, 4, (batch, 1))}


def _steps(backend: str, monkeypatch, piece_ops: int | None, feeds: list[dict]):
    if piece_ops is not None:
        monkeypatch.setattr(pieces, "PIECE_OPS", piece_ops)
    main_program, startup, loss, h = _mlp()
    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    for name in sorted(scope.keys()):  # the same start on every engine (the draws are each engine's own)
        value = np.array(scope[name])
        if value.dtype.kind == "f" and value.size > 1:
            scope.set(name, np.sin(np.arange(value.size)).reshape(value.shape).astype(value.dtype))
    out = [exe.run(main_program, feed=f, fetch_list=[loss, h], scope=scope) for f in feeds]
    params = {n: np.array(scope[n]) for n in scope.keys()}
    return out, params, main_program


def test_cuts_keep_block_order_and_leave_a_block_with_control_flow_whole():
    main_program, _, _, _ = _mlp()
    block = main_program.global_block()
    cut = pieces.cuts(block, frozenset({0}), piece_ops=4)
    assert [i for p in cut for i in p] == list(range(1, len(block.ops))) and max(map(len, cut)) == 4
    loop = Program()
    with program_guard(loop, Program()):
        x = layers.data("x", [-1, 2], "float64")
        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 3)
        _, h = layers.while_loop(lambda i, h: layers.less_than(i, n), lambda i, h: [i + 1, layers.tanh(h)], [i, x])
        layers.reduce_sum(layers.tanh(layers.scale(layers.tanh(h), 2.0)))
    assert len(loop.global_block().ops) > 4
    assert len(pieces.cuts(loop.global_block(), frozenset(), piece_ops=4)) == 1


@pytest.mark.parametrize("piece_ops", [3, 7])
def test_a_block_run_in_pieces_computes_what_the_reference_and_one_piece_compute(monkeypatch, piece_ops):
    feeds = [_feed(3), _feed(3), _feed(5), _feed(0)]  # a new batch size is a new set of executables
    want, want_params, _ = _steps("numpy", monkeypatch, None, feeds)
    whole, whole_params, _ = _steps("xla", monkeypatch, None, feeds)
    got, got_params, main_program = _steps("xla", monkeypatch, piece_ops, feeds)
    assert len(main_program.global_block().ops) > 3 * piece_ops  # it was cut
    for step in range(len(feeds)):
        for a, b, c in zip(want[step], whole[step], got[step]):
            np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(c, b)  # the cuts change no rounding here: XLA fuses nothing across them
    assert sorted(got_params) == sorted(want_params)
    for name in want_params:
        np.testing.assert_allclose(got_params[name], want_params[name], rtol=1e-12, atol=1e-14, err_msg=name)


def test_a_failure_in_a_later_piece_commits_nothing(monkeypatch):
    monkeypatch.setattr(pieces, "PIECE_OPS", 4)
    main_program, startup, loss, _ = _mlp()
    exe, scope = Executor(backend="xla"), Scope()
    exe.run(startup, scope=scope)
    exe.run(main_program, feed=_feed(), fetch_list=[loss], scope=scope)
    before = {n: np.array(scope[n]) for n in scope.keys()}
    bad = dict(_feed(), ids=np.array([[1], [9], [2]]))  # id 9 of a 4-row table: the lookup's check fails
    with pytest.raises(GradgenError, match="lookup_table"):
        exe.run(main_program, feed=bad, fetch_list=[loss], scope=scope)
    for name, value in before.items():
        np.testing.assert_array_equal(np.array(scope[name]), value, err_msg=name)


def test_random_programs_agree_with_the_reference_when_cut_into_small_pieces(monkeypatch):
    monkeypatch.setattr(pieces, "PIECE_OPS", 5)
    cut, reports = 0, []
    for seed in range(24):
        built = build(seed, 2)
        block = built.main.global_block()
        cut += len(pieces.cuts(block, frozenset())) > 1
        initial = initial_values(built)
        found = mismatches(built, run_on("numpy", built, initial), run_on("xla", built, initial))
        if found:
            reports.append(f"seed {seed}: " + "; ".join(found[:3]))
    assert not reports, "\n".join(reports)
    assert cut >= 8, f"only {cut} of 24 programs were cut: the test would prove little"


CHAIN = """
import numpy as np, time
from gradgen.framework import Executor, Scope, optimizer
from gradgen.program import Program, layers, program_guard
main, startup = Program(), Program()
with program_guard(main, startup):
    h = layers.data("x", [-1, 16], "float32")
    for k in range({pairs}):
        h = layers.tanh(layers.scale(h, 0.9 + 0.0001 * k))
    loss = layers.reduce_mean(layers.fc(h, 4))
    optimizer.SGD(0.01).minimize(loss)
exe, scope = Executor(backend="xla"), Scope()
exe.run(startup, scope=scope)
x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
start = time.perf_counter()
(got,) = exe.run(main, feed={{"x": x}}, fetch_list=[loss], scope=scope)
print(time.perf_counter() - start, float(got))
"""


def test_a_chain_that_compiled_whole_would_not_finish_compiles_in_seconds(tmp_path):
    """1,200 elementwise ops in one chain: whole, XLA's compile did not finish in 100 s (``MAX_FUSED_CHAIN``)."""
    env = {**os.environ, "GRADGEN_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHAIN.format(pairs=600)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    seconds, loss = map(float, done.stdout.split())
    assert seconds < 30 and np.isfinite(loss)


def test_auto_declines_only_what_compiles_whole_and_is_too_long(monkeypatch):
    flat = Program()
    with program_guard(flat, Program()):
        h = layers.data("x", [-1, 4], "float64")
        for _ in range(pieces.MAX_FUSED_CHAIN // 2 + 1):
            h = layers.tanh(layers.scale(h, 0.5))
        layers.fc(h, 2)
    assert pieces.longest_fused_chain(flat.global_block()) > pieces.MAX_FUSED_CHAIN
    assert pieces.declines(flat) is None  # compiled in pieces: no chain longer than PIECE_OPS
    monkeypatch.setattr(pieces, "PIECE_OPS", 10 ** 6)  # were it compiled whole, the chain is declined
    assert "elementwise ops" in pieces.declines(flat)
    looped = Program()
    with program_guard(looped, Program()):
        x = layers.data("x", [-1, 2], "float64")
        i = layers.fill_constant([1], "int64", 0)
        layers.while_loop(lambda i, h: layers.less_than(i, layers.fill_constant([1], "int64", 3)),
                          lambda i, h: [i + 1, layers.tanh(h)], [i, x])
    assert pieces.declines(looped) is None
    monkeypatch.setattr(pieces, "MAX_WHOLE_OPS", 2)
    assert "with control flow" in pieces.declines(looped)


def test_the_lowered_text_of_a_block_in_pieces_shows_each_piece(monkeypatch):
    from gradgen.framework.backend.xla.show import lowered_text

    monkeypatch.setattr(pieces, "PIECE_OPS", 6)
    main_program, _, loss, _ = _mlp()
    text = lowered_text(main_program, ["x", "ids"], [loss.name], batch=2)
    count = len(pieces.cuts(main_program.global_block(), frozenset()))
    assert count > 2 and text.count("// piece ") == count and f"// piece {count} of {count}: ops #" in text
    assert text.count("module @") == count
