"""Every engine against the reference interpreter on random programs (issue 31's differential test).

``PROGRAMS`` programs of ``PIECES`` random piece each (``random_programs``): 500 programs with their backward
and an optimizer update (``GRADGEN_DIFFERENTIAL_PROGRAMS=N`` runs N: the seeds are the first N, so a longer run
takes in the suite's), each compiled on its own, every fetched value compared by ``compare.mismatches``. The
XLA compiles dominate (0.3-0.4 s a program with no persistent cache on a 2-core AMD EPYC, against 0.29 s a piece
for programs of four pieces: one piece a program costs little more), so the seeds are split over two worker
processes, one per core. The torch engine runs the programs it can (no ``cond`` or ``while``: about two in three),
from more seeds (``SEEDS``), 0.02 s a program, and a second pass of programs of three pieces (``COMPOSED``).

Known engine differences the generator steps around, each with its repro: the order of a product's additions
where its terms cancel (``random_programs.LARGE_IN_FIRST_PRODUCT``, seed 70 on an AMD EPYC), an order rule 4 of
``design_docs/numerics.md`` leaves to each engine. Each engine bug once listed here is fixed and tested on its own
(``tests/backends/test_numerics.py``): XLA's fused ``softmax(x @ x^T)`` turning rows NaN (``KNOWN_XLA`` until
issue 33).

The seeds are fixed, and the generator was tuned on them: one-piece seeds 0-1999 agree on xla since the step-around
for ``sign`` (seed 941 below). Before, programs were of four pieces, and a sweep past CI's seeds (500-1999) found 6
programs the comparison flags, each a difference ``design_docs/numerics.md`` allows, made large by the program: an
FMA's overflow (a product past float32's range added to an infinity gives that infinity where the rounded product
gives NaN, seed 996), an FMA's rounding in ``y * (dy - sum(dy * y))`` at |dy| 1e15 then multiplied by 1e14 (1411), a
subnormal product flushed to zero under ``sign`` (941, now stepped around: ``random_programs._normal_or_zero``), a
float64 sum of terms near 1e14 that cancel to 721 (606: the tolerance scales with the result, not the terms), and
float32 ``cos`` of a value near 100 that layer norm and a product had rounded (1029; the generator now clips float32
sin and cos inputs to +-10, ``SIN_COS_BOUND``, and 1029 passes).
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Callable

import numpy as np
import pytest

from gradgen.framework import backends
from gradgen.framework.backend import load_backend
from gradgen.program.errors import GradgenError
from tests.extras import require

from .compare import initial_values, mismatches, run_on
from .random_programs import CONTROL_FLOW, Built, build, build_second_order

PROGRAMS = int(os.environ.get("GRADGEN_DIFFERENTIAL_PROGRAMS", "500"))
"""Programs the suite compares on each engine. 2,000 until 2026-11-30, then 1,500, then 1,000 (CI took 550-645 s of
its 600 in four stops), then 700, now 500: with 700 the local suite took 635 and 681 s (2026-12-02, 2 cores, this
test 148 worker-seconds of them: xla 72 s, torch's three-piece pass 29, with its two processes beside the other
xdist worker), and CI 589 s. On the 2-core AMD EPYC a program costs 0.15 s of CPU with the persistent compile cache
warm (jax's trace and lowering, ~0.1 s, come before the cache is asked) and 0.71 s cold (0.48 s wall: XLA's compiler
uses 1.5 cores); with the cache cold, this test was 733 of the suite's 2,773 worker-seconds (24 min). Seeds
500-1,999 agreed in every suite run of the stops that ran them (``GRADGEN_DIFFERENTIAL_PROGRAMS=2000`` runs them
again; sweeps past them are in ``design_docs/performance.md``)."""
PIECES = 1
WORKERS = 2
TIMEOUT_S = 1500
"""How long each worker may take: 2,000 programs' cold compiles (no persistent cache) beside the rest of the
suite took 766 s on a 2-core AMD EPYC."""


def check_seeds(seeds: list[int], engine: str, make: Callable[[int], Built | None] = partial(build, pieces=PIECES)
                ) -> tuple[int, int, list[str]]:
    """(programs compared, programs both engines refused, one report per program that differs) for ``seeds``, each
    program ``make(seed)`` (none where it gives None); a program ``engine`` says up front it cannot run (the torch
    engine's control flow) is not compared."""
    cannot_run = load_backend(engine).problems
    compared, refused, reports = 0, 0, []
    for seed in seeds:
        built = make(seed)
        if built is None or cannot_run(built.main.global_block()):
            continue
        compared += 1
        initial = initial_values(built)
        reference, other = run_on("numpy", built, initial), run_on(engine, built, initial)
        refused += isinstance(reference, GradgenError) and isinstance(other, GradgenError)
        found = mismatches(built, reference, other)
        if found:
            reports.append(f"seed {seed}: " + "; ".join(found[:3]) + "\n  " + "\n  ".join(built.described))
    return compared, refused, reports


SEEDS = {"torch": PROGRAMS * 8 // 5}
"""Seeds an engine goes through where it cannot run some programs, to compare at least ``PROGRAMS`` (the torch
engine runs about two in three: no ``cond`` or ``while``); ``PROGRAMS`` for the others."""


COMPOSED = {"torch": (3, PROGRAMS * 2)}
"""engine -> (pieces, seeds) of a second pass over programs of several pieces, where an engine that runs a program
in hundredths of a second meets ops in each other's company: one piece's outputs feeding the next's (seed 1251 of
three pieces found the torch engine's layer norm gradient over a size-1 slice of a 3-D product wrong; about three
in ten such programs have no control flow, so the torch engine runs them). Seeds 0-39,999 of three pieces agree on
the torch engine since, but two whose comparison is ill-conditioned, allowed differences a later op makes large:
15758 (tanh saturating to 1 on one engine and an ulp below on the other, then log and sqrt: 0 against NaN) and 21730
(1 / log(exp(x)) at x ~5e-7, where log(exp(x)) keeps x to ~1e-7)."""


def _engines() -> list[str]:
    return [name for name in backends() if name != "numpy"]


def _passes() -> list:
    """(engine, pieces, seeds, least compared) of each pass: every engine on one-piece programs, and the
    ``COMPOSED`` passes."""
    plain = [pytest.param(name, PIECES, SEEDS.get(name, PROGRAMS), PROGRAMS, id=name) for name in _engines()]
    composed = [pytest.param(name, pieces, seeds, PROGRAMS // 2, id=f"{name}-{pieces}-pieces")
                for name in _engines() for pieces, seeds in [COMPOSED.get(name, (0, 0))] if seeds]
    return plain + composed or [pytest.param("xla", PIECES, 0, 0, marks=pytest.mark.skip("no engine"))]


@pytest.mark.parametrize("engine,pieces,seeds,least", _passes())
def test_every_engine_agrees_with_the_reference_on_random_programs(engine, pieces, seeds, least):
    chunks = [list(range(seeds))[k::WORKERS] for k in range(WORKERS)]
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(check_seeds, chunk, engine, partial(build, pieces=pieces)) for chunk in chunks]
        results = [f.result(timeout=TIMEOUT_S) for f in futures]
    compared = sum(r[0] for r in results)
    refused = sum(r[1] for r in results)
    reports = [line for r in results for line in r[2]]
    assert compared >= least, f"{compared} programs of {pieces} piece(s) compared on {engine}"
    assert refused <= compared // 20, \
        f"{refused} of {compared} programs raised on both engines: the test checks too little"
    assert not reports, f"{len(reports)} of {compared} programs differ from the reference:\n" + "\n".join(reports[:10])


def test_the_comparison_catches_what_an_engine_could_get_wrong():
    """Each kind of wrong answer, made by hand from the reference's own result, is reported."""
    built = build(7, PIECES)
    reference = run_on("numpy", built, initial_values(built))
    assert not isinstance(reference, GradgenError) and mismatches(built, reference, reference) == []
    at = next(k for k, v in enumerate(reference) if v.dtype.kind == "f" and np.isfinite(v).sum() > 1)
    wrongs = []
    for change in ("value", "nan", "inf", "dtype", "shape"):
        other = [np.array(v, copy=True) for v in reference]
        v = other[at]
        i = int(np.flatnonzero(np.isfinite(v))[0])
        if change == "value":
            v.flat[i] += 0.5 * max(1.0, float(np.max(np.abs(v[np.isfinite(v)]))))
        elif change == "nan":
            v.flat[i] = np.nan
        elif change == "inf":
            v.flat[i] = np.inf
        elif change == "dtype":
            other[at] = v.astype(np.float64 if v.dtype == np.float32 else np.float32)
        else:
            other[at] = v.reshape(-1)
        wrongs.append(mismatches(built, reference, other))
    assert all(len(w) == 1 and built.fetch[at] in w[0] for w in wrongs), wrongs
    assert mismatches(built, reference, GradgenError("refused")) != []


def test_pieces_cover_what_the_issue_lists():
    """Over the seeds the test runs: every kind of step, both float dtypes, both integer dtypes, empty and
    size-1 batches, and special values in the feeds; among the steps the numeric contract's cases
    (``design_docs/numerics.md``): pow by a number and by a fed exponent, the compositions XLA's simplifier
    rewrote, padded and dilated convolutions, padded pooling, softmax of the chain and of attention's scores."""
    seen, dtypes, batches, special, lines = set(), set(), set(), 0, []
    for seed in range(0, PROGRAMS, 5):
        built = build(seed, PIECES)
        lines += built.described
        for line in built.described:
            head, steps = line.split(": ", 1)
            dtypes.add(head.split("(")[1].split(",")[0])
            batches.add(int(head.split("batch ")[1].rstrip(")")))
            seen.update(step.split("[")[0].split(" ")[0] for step in steps.split(", "))
        special += any(np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all() for v in built.feed.values())
    for step in ("matmul", "batched", "reduce_sum", "reduce_max", "softmax", "conv2d", "batch_norm",
                 "layer_norm", "cond", "while", "SGD", "Momentum", "int", "pow", "log(exp)", "exp(x)*exp(y)",
                 "log(pow)"):
        assert step in seen, step
    for kind in ("pow[fed exponent]", "conv2d dilated", "pool2d padded", "pool2d max", "pool2d avg",
                 "cross-entropy[int64]", "cross-entropy[int32]", "cross-entropy[soft]"):
        assert any(kind in line for line in lines), kind
    assert dtypes == {"float32", "float64", "int32", "int64"} and {0, 1} <= batches and special > 10


SECOND_ORDER = {"torch": 400}
"""engine -> seeds of second-order programs (``random_programs.build_second_order``: the gradient of a gradient's
squares, through every step's grad ops), for the engines that run a program in hundredths of a second (xla's
compiles would take minutes). 2,000 agreed on torch; on xla all of the 391 probed but seed 20, a float64 gradient
7e-8 apart where attention's scores reach ~1e10 (the softmax gradient's cancellation, an FMA's choice)."""


@pytest.mark.parametrize("engine", list(SECOND_ORDER))
def test_second_order_programs_agree_with_the_reference(engine):
    require(None if engine in _engines() else engine, "pip install -e '.[oracle]' (torch)")
    skip = CONTROL_FLOW if engine == "torch" else ()  # the torch engine runs no sub-blocks: draw none
    compared, refused, reports = check_seeds(list(range(SECOND_ORDER[engine])), engine,
                                             partial(build_second_order, skip=skip))
    assert compared >= SECOND_ORDER[engine] * 9 // 10 and refused <= compared // 20, (compared, refused)
    assert not reports, f"{len(reports)} of {compared} programs differ:\n" + "\n".join(reports[:10])
