"""One training step of a survey workload on one candidate engine, for ``engine_survey``.

``make_engine_step(engine, workload, folder, threads, workdir)`` returns a function that runs one whole training step
(forward, backward, optimizer update) and returns the loss as a Python float, from the same data and initial weights
on every engine. The workloads: the anchors' LeNet, ResNet blocks, transformer block and RNN, built exactly as the
anchors' ``wl.py`` builds them (imported from ``folder``, not copied), and the bench's seed and large MLPs
(``steps.mlp_program``). The engines:

- ``numpy``, ``xla``: gradgen's ``Executor(backend=...)`` runs the program;
- ``jax``: the anchors' hand-written JAX jit step (``wl.setup_jax``; for the MLPs ``steps``' own);
- ``ort``, ``openvino``, ``iree``: the program exported by ``export_onnx`` with its updated persistables (parameters,
  optimizer state, running statistics) as graph inputs and their ``@NEW`` values as outputs, so one call is one
  step; the new values are fed back the next step. Vars the program only reads (the learning rate) are
  initializers. The fed inputs' -1 dims are set to the fed sizes (JAX's jit sees static shapes too).

Each engine's package is imported only when its step is made: a process that times one engine loads no other.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["WORKLOADS", "ENGINES", "make_engine_step"]

MLP_CASES = {"seed": "seed-f32", "large": "large-f32"}
"""Survey workload name -> the bench's MLP case (``steps.CASES``)."""
WORKLOADS = ("seed", "lenet", "resnet", "transformer", "rnn", "large")
ENGINES = ("numpy", "xla", "jax", "ort", "openvino", "iree")
UPDATED_SUFFIX = "@NEW"


def _anchors(folder: str):
    """The anchors' ``wl.py`` in ``folder``, imported as a module of its own."""
    spec = importlib.util.spec_from_file_location("anchors_workloads", os.path.join(folder, "wl.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(workload: str, folder: str) -> tuple:
    """(main, startup, loss, feed, {scope name: initial value}) of ``workload``."""
    from . import steps

    if workload in MLP_CASES:
        return steps.mlp_program(*steps.case_data(MLP_CASES[workload]))
    wl = _anchors(folder)
    return wl.gg_build(workload, *wl.DATA[workload]())


def _initialized(startup, values: dict, backend: str):
    """An executor and a scope holding the startup program's vars, then ``values`` (reshaped to the scope's shape when
    only the shape's spelling differs, e.g. a conv bias given as (6,) where the layer keeps (6, 1, 1))."""
    from gradgen.framework import Executor, Scope

    exe, scope = Executor(backend=backend), Scope()
    exe.run(startup, scope=scope)
    for name, value in values.items():
        assert name in scope, f"{name} is not made by the startup program"
        scope.set(name, np.asarray(value).reshape(scope[name].shape).copy())
    return exe, scope


def _gradgen_step(backend: str, workload: str, folder: str) -> Callable[[], float]:
    main, startup, loss, feed, values = _program(workload, folder)
    exe, scope = _initialized(startup, values, backend)
    return lambda: float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])


def _jax_step(workload: str, folder: str) -> Callable[[], float]:
    from . import steps

    if workload in MLP_CASES:
        return steps.make_step("jax", MLP_CASES[workload])
    wl = _anchors(folder)
    return wl.setup_jax(workload, *wl.DATA[workload]())[0]


def _static_inputs(model, feeds: dict) -> None:
    """Set each graph input's unknown dims to the size of the array that will be fed."""
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        for dim, size in zip(dims, np.shape(feeds[value.name])):
            if not dim.HasField("dim_value"):
                dim.dim_value = size


def _export(workload: str, folder: str, workdir: str) -> tuple[str, list[str], dict, dict]:
    """The training step as an ONNX file: (path, output names, data feeds, initial state by input name)."""
    import onnx

    from gradgen.framework.tools.onnx import export_onnx

    main, startup, loss, feed, values = _program(workload, folder)
    _, scope = _initialized(startup, values, "numpy")
    block = main.global_block()
    written = {n for op in block.ops for names in op.outputs.values() for n in names}
    persistable = [name for name, var in block.vars.items() if var.persistable and name in scope]
    constants = {n: scope[n] for n in persistable if n not in written}
    state = {n: scope[n] for n in persistable if n in written}
    model = export_onnx(main, params=constants, fetch_list=[loss])
    _static_inputs(model, {**feed, **state})
    path = os.path.join(workdir, f"{workload}.onnx")
    onnx.save(model, path)
    return path, [o.name for o in model.graph.output], feed, state


def _ort(path: str, threads: int) -> Callable[[dict], list]:
    import onnxruntime as ort

    options = ort.SessionOptions()   # graph_optimization_level defaults to ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda feeds: session.run(None, {n: feeds[n] for n in names})


def _openvino(path: str, threads: int) -> Callable[[dict], list]:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(path)
    names = [i.get_any_name() for i in model.inputs]   # the compiled model's ports may carry other names
    # The CPU plugin's default precision hint is bf16 on CPUs that have it: ask for the declared f32.
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()

    def run(feeds):
        result = request.infer([feeds[n] for n in names], share_inputs=True)
        return [result[o] for o in compiled.outputs]
    return run


def _error_lines(text: str, limit: int = 400) -> str:
    """The ``error:`` lines of a compiler's output, each cut to ``limit`` characters (IREE prints the whole CPU
    feature list in them), or the text's last line when none says error."""
    lines = [ln.strip()[:limit] for ln in text.splitlines() if "error:" in ln]
    return "\n".join(lines) or (text.strip().splitlines() or [""])[-1][:limit]


def _iree(path: str, threads: int) -> Callable[[dict], list]:
    import onnx
    import iree.compiler as ireec
    import iree.runtime as ireert

    mlir = str(Path(path).with_suffix(".mlir"))
    tool = os.path.join(os.path.dirname(sys.executable), "iree-import-onnx")
    done = subprocess.run([tool, path, "-o", mlir], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError("iree-import-onnx: " + _error_lines(done.stderr + done.stdout))
    try:
        binary = ireec.compile_file(mlir, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"])
    except ireec.CompilerToolError as e:
        raise RuntimeError("iree-compile: " + _error_lines(str(e))) from None
    ireert.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    config = ireert.Config("local-task")
    context = ireert.SystemContext(config=config)
    context.add_vm_module(ireert.VmModule.copy_buffer(context.instance, binary))
    graph = onnx.load(path, load_external_data=False).graph
    names = [i.name for i in graph.input]
    function = context.modules.module[graph.name]   # iree-import-onnx names the module "module"

    def run(feeds):
        outs = function(*[feeds[n] for n in names])
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        return [np.asarray(o.to_host()) for o in outs]
    return run


ONNX_RUNNERS = {"ort": _ort, "openvino": _openvino, "iree": _iree}


def _onnx_step(engine: str, workload: str, folder: str, threads: int, workdir: str) -> Callable[[], float]:
    path, outputs, feed, state = _export(workload, folder, workdir)
    run = ONNX_RUNNERS[engine](path, threads)
    updated = [(i, name[:-len(UPDATED_SUFFIX)]) for i, name in enumerate(outputs) if name.endswith(UPDATED_SUFFIX)]

    def step():
        outs = run({**feed, **state})
        for i, name in updated:
            state[name] = outs[i]
        return float(np.asarray(outs[0]).reshape(-1)[0])
    return step


def make_engine_step(engine: str, workload: str, folder: str, threads: int, workdir: str) -> Callable[[], float]:
    """One training step of ``workload`` on ``engine``; it returns the loss before the update."""
    if engine in ("numpy", "xla"):
        return _gradgen_step(engine, workload, folder)
    if engine == "jax":
        return _jax_step(workload, folder)
    if engine in ONNX_RUNNERS:
        return _onnx_step(engine, workload, folder, threads, workdir)
    raise ValueError(f"unknown engine {engine!r}; one of {ENGINES}")
