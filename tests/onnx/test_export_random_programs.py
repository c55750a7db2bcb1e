"""The differential test's random programs (``tests/differential``), each with its backward and optimizer update,
exported to ONNX and run in ONNX Runtime against the reference interpreter, with the differential test's rule
(``compare``): the same dtypes and shapes, integers equal, NaN and infinities where the reference has them, floats
within its tolerance. Running these found what ``test_export_runtime_edges`` now holds: models the checker refused
(integer true division, int32 sums) and silent differences (means over no elements, a max passing over a NaN,
log-softmax of rows with NaN or +inf).

ONNX Runtime 1.32 died of SIGFPE on 20 of the first 1,000 (the filter gradient's ``Einsum`` summing over an empty
batch), until the export gave it a row of zeros there (``lower_conv._with_a_zero_row``). Seeds 0-999 agree but for
785, whose float64 layer norm (ONNX Runtime's
``LayerNormalization``, accurate to 2-8e-9 after some chains) is over the 1e-9 bar. The same programs imported back
(``import_onnx``) and run on the reference give its numbers (1,000 one-piece and 800 three-piece programs agreed)."""
from __future__ import annotations

import numpy as np

from gradgen.framework import Executor, Scope
from tests.differential.compare import initial_values, mismatches, run_on
from tests.differential.random_programs import build
from tests.onnx.runtime import require, run_ort

SEEDS = 400
"""One-piece programs exported: ~9 s on a 2-core AMD EPYC."""
ROUND_TRIP_SEEDS = 200
"""One-piece programs exported and imported back: ~8 s."""


def _differences(seeds: int, run_model) -> list[str]:
    """One report per program of the first ``seeds`` whose export, run by ``run_model(model, built)`` (output name
    -> value), differs from the reference. A parameter's updated value is its output ``<name>@NEW``; a fed value is
    not an output."""
    from gradgen.framework import export_onnx

    reports = []
    for seed in range(seeds):
        built = build(seed, 1)
        initial = initial_values(built)
        reference = run_on("numpy", built, initial)
        assert isinstance(reference, list), f"seed {seed}: the reference raised {reference}"
        fetch = [name for name in built.fetch if name not in initial and name not in built.feed]
        with np.errstate(all="ignore"):
            outs = run_model(export_onnx(built.main, params=initial, fetch_list=fetch, include_updates=True), built)
        got = [outs[name + "@NEW"] if name in initial else outs.get(name, built.feed.get(name))
               for name in built.fetch]
        found = mismatches(built, reference, got)
        if found:
            reports.append(f"seed {seed}: " + "; ".join(found[:3]) + "\n  " + "\n  ".join(built.described))
    return reports


def _imported_back(model, built) -> dict:
    """The model imported as a gradgen program and run on the reference: output name -> value."""
    from gradgen.framework import import_onnx

    program, params, outputs = import_onnx(model)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    names = [o.name for o in model.graph.output]
    feed = {k: np.asarray(v) for k, v in built.feed.items() if program.global_block().find_var(k) is not None}
    values = Executor(backend="numpy").run(program, feed=feed, fetch_list=[outputs[n] for n in names], scope=scope)
    return dict(zip(names, values))


def test_random_programs_run_in_onnx_runtime_as_on_the_reference():
    require("onnxruntime")
    reports = _differences(SEEDS, lambda model, built: run_ort(model, built.feed))
    assert not reports, f"{len(reports)} programs differ in ONNX Runtime:\n" + "\n".join(reports[:10])


def test_random_programs_exported_and_imported_back_compute_what_they_did():
    require("onnx")
    reports = _differences(ROUND_TRIP_SEEDS, _imported_back)
    assert not reports, f"{len(reports)} programs differ after the round trip:\n" + "\n".join(reports[:10])
