"""ONNX's own backend node tests, run through gradgen's importer and executor.

The ``onnx`` wheel ships its node tests as generators (``onnx.backend.test.case.node``): each builds a
small model and input/output arrays in memory, the same data ``python -m onnx.backend.test.cmd_tools
generate-data`` writes to files. Every case whose nodes the importer has functions for is imported and
run; a case passes when every output matches within the case's own tolerances. Integer inputs that
gradgen keeps as attrs (shapes, axes, pads) are frozen to their test values.

    python -m tests.onnx.conformance            # print the pass count per op
    python -m tests.onnx.conformance --write    # also rewrite the expected list and the design_docs table
"""
from __future__ import annotations

import os
import sys
import textwrap
import warnings
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "node_tests_passing.txt")
DOC = os.path.join(HERE, "..", "..", "design_docs", "onnx.md")
TABLE_START, TABLE_END = "<!-- node-test table: start -->", "<!-- node-test table: end -->"
OPS_START, OPS_END = "<!-- importer ops: start -->", "<!-- importer ops: end -->"


@dataclass
class Outcome:
    name: str
    op: str
    passed: bool
    reason: str = ""


def node_cases() -> list:
    """Every node test case the installed onnx wheel generates (numpy warnings of the generators silenced)."""
    import onnx.backend.test.case.node as node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(node.collect_testcases(None))


@dataclass
class ModelCase:
    """A whole model shipped in the wheel, with its data sets (as the node cases have them)."""

    name: str
    model: object
    data_sets: list
    rtol: float = 1e-3
    atol: float = 1e-7
    kind: str = "model"


ILL_CONDITIONED = {
    "light/light_squeezenet": (
        "ONNX's dummy input and weights make all 1000 logits equal, near 9.5e9, where one float32 step is 1024: "
        "the closing softmax turns a one-step difference in a convolution's rounding (which differs between BLAS "
        "kernels, and so between CPUs) into 0 against 0.001. The logits before the softmax are compared with "
        "ONNX Runtime's instead, to float32 precision"),
}
"""Whole models whose expected output a one-ulp rounding difference upstream changes beyond any tolerance: name
-> why. Their last node's input is compared with ONNX Runtime's (``_logits_agree``), never skipped."""


MODEL_SUITES = ("pytorch-operator", "pytorch-converted", "light")
"""The folders of onnx/backend/test/data with small whole models."""


def _read_tensor(path: str):
    from onnx import TensorProto, numpy_helper

    tensor = TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def model_cases() -> list[ModelCase]:
    """The wheel's small whole models. ``light`` models ship only outputs; their inputs are ONNX's own dummy
    data (``Runner.generate_dummy_data(..., random=False)``), as ONNX's test runner makes them."""
    import glob

    import onnx
    from onnx.backend.test.runner import Runner

    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    cases = []
    for suite in MODEL_SUITES[:2]:
        for folder in sorted(glob.glob(os.path.join(root, suite, "*"))):
            model = onnx.load(os.path.join(folder, "model.onnx"))
            sets = []
            for data in sorted(glob.glob(os.path.join(folder, "test_data_set_*"))):
                ins = [_read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
                outs = [_read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
                sets.append((ins, outs))
            cases.append(ModelCase(f"{suite}/{os.path.basename(folder)}", model, sets))
    for path in sorted(glob.glob(os.path.join(root, "light", "*.onnx"))):
        model = onnx.load(path)
        inits = {t.name for t in model.graph.initializer}
        ins = [Runner.generate_dummy_data(i, seed=0, random=False) for i in model.graph.input if i.name not in inits]
        outs = [_read_tensor(f"{path[:-5]}_output_{k}.pb") for k in range(len(model.graph.output))]
        cases.append(ModelCase(f"light/{os.path.basename(path)[:-5]}", model, [(ins, outs)]))
    return cases


def _op_of(case) -> str:
    if getattr(case, "kind", "") == "model":
        return "(whole models)"
    types = sorted({n.op_type for n in case.model.graph.node})
    return types[0] if len(types) == 1 else "(multi-node graphs)"


def importable(case) -> bool:
    from gradgen.framework.tools.onnx.importer import unsupported_nodes

    graph = case.model.graph
    tensors = all(i.type.HasField("tensor_type") for i in list(graph.input) + list(graph.output))
    return tensors and not unsupported_nodes(case.model)


def _array(value) -> np.ndarray:
    """A data set value as numpy (some cases store TensorProtos, for types numpy lacks)."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def run_case(case) -> Outcome:
    """Import the case's model and run every data set in gradgen's executor."""
    from gradgen.framework import Executor, Scope
    from gradgen.framework.tools.onnx import import_onnx
    from gradgen.program.errors import GradgenError

    op = _op_of(case)
    if case.name in ILL_CONDITIONED:
        case = ModelCase(case.name, _with_last_input_as_output(case.model), case.data_sets, rtol=1e-5, atol=0.0)
    graph = case.model.graph
    try:
        for inputs, outputs in case.data_sets:
            initialized = {t.name for t in graph.initializer}
            fed = [i for i in graph.input if i.name not in initialized]
            values = {i.name: _array(v) for i, v in zip(fed, inputs)}
            frozen = {k: v for k, v in values.items() if v.dtype.kind in "iu" or v.ndim == 0}
            program, params, outs = import_onnx(case.model, constants=frozen)
            scope = Scope()
            for name, value in params.items():
                scope.set(name, value)
            block = program.global_block()
            feed = {k: v for k, v in values.items() if block.find_var(k) is not None and k not in params}
            got = Executor().run(program, feed=feed, fetch_list=[outs[o.name] for o in graph.output], scope=scope)
            if case.name in ILL_CONDITIONED:
                outputs = _onnx_runtime_outputs(case.model, fed, inputs)
            for o, g, want in zip(graph.output, got, outputs):
                want = _array(want)
                if g.shape != want.shape or g.dtype != want.dtype:
                    return Outcome(case.name, op, False, f"{o.name}: {g.dtype}{list(g.shape)}, "
                                                         f"want {want.dtype}{list(want.shape)}")
                np.testing.assert_allclose(g, want, rtol=case.rtol, atol=case.atol)
    except (GradgenError, AssertionError, ValueError, KeyError) as e:
        return Outcome(case.name, op, False, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}")
    return Outcome(case.name, op, True)


def _with_last_input_as_output(model):
    """A copy of ``model`` whose only output is its last node's first input (the logits of a closing softmax)."""
    import copy

    from onnx import TensorProto, helper

    model = copy.deepcopy(model)
    logits = model.graph.node[-1].input[0]
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, None))
    return model


def _onnx_runtime_outputs(model, fed, inputs) -> list:
    """What ONNX Runtime computes for ``model`` on these inputs: the reference for an ill-conditioned model."""
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: _array(v) for i, v in zip(fed, inputs)})


SLOW_MODELS = ("light/light_vgg19", "light/light_densenet121", "light/light_inception_v2")
"""Whole models that take several seconds each in numpy: run by this script (and in the doc), not by the suite."""


def run_all(cases=None, skip_slow: bool = False) -> list[Outcome]:
    cases = node_cases() + model_cases() if cases is None else cases
    if skip_slow:
        cases = [c for c in cases if c.name not in SLOW_MODELS]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [run_case(c) for c in cases if importable(c)]


def table(outcomes: list[Outcome], total_cases: int) -> str:
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        per_op[o.op][0] += o.passed
        per_op[o.op][1] += 1
    nodes = [o for o in outcomes if o.op != "(whole models)"]
    models = [o for o in outcomes if o.op == "(whole models)"]
    summary = (f"{sum(o.passed for o in nodes)} of the {len(nodes)} node tests whose ops the importer supports pass "
               f"({total_cases} node tests in the installed onnx wheel); {sum(o.passed for o in models)} of the "
               f"{len(models)} whole models whose ops it supports pass.")
    lines = [*textwrap.wrap(summary, 110), "",
             "| ONNX op | tests passed |", "|---|---|"]
    lines += [f"| {op} | {p} / {n} |" for op, (p, n) in sorted(per_op.items())]
    passing = "Whole models that pass: " + ", ".join(sorted(o.name for o in models if o.passed)) + "."
    lines += ["", *textwrap.wrap(passing, 110, break_on_hyphens=False)]
    return "\n".join(lines)


def expected_passing() -> list[str]:
    with open(EXPECTED) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def supported_ops() -> str:
    """The sentence of design_docs/onnx.md that lists the op types the importer has functions for."""
    from gradgen.framework.tools.onnx.import_table import IMPORTERS

    return "\n".join(textwrap.wrap(f"Supported ONNX ops ({len(IMPORTERS)}): {', '.join(sorted(IMPORTERS))}.", 110,
                                   break_on_hyphens=False))


def with_generated(doc: str, start_mark: str, end_mark: str, text: str) -> str:
    """``doc`` with the text between two marker comments replaced by ``text``."""
    start, end = doc.index(start_mark) + len(start_mark), doc.index(end_mark)
    return doc[:start] + "\n" + text + "\n" + doc[end:]


def _write(outcomes: list[Outcome], total: int) -> None:
    with open(EXPECTED, "w") as f:
        f.write("# ONNX backend node tests that pass through gradgen's importer (python -m tests.onnx.conformance "
                "--write)\n")
        f.write("\n".join(sorted(o.name for o in outcomes if o.passed)) + "\n")
    with open(DOC) as f:
        doc = f.read()
    doc = with_generated(with_generated(doc, TABLE_START, TABLE_END, table(outcomes, total)), OPS_START, OPS_END,
                         supported_ops())  # made before the file is opened: a doc missing a marker stays whole
    with open(DOC, "w") as f:
        f.write(doc)


def main(argv: list[str]) -> int:
    cases = node_cases()
    outcomes = run_all(cases + model_cases())
    print(table(outcomes, len(cases)))
    for o in outcomes:
        if not o.passed and "-v" in argv:
            print(f"FAIL {o.name}: {o.reason}")
    if "--write" in argv:
        _write(outcomes, len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
