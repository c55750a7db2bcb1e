"""``gradgen.framework.fluid``: Paddle Fluid's names over gradgen, so Paddle 1.x static-graph code runs as written.

    from gradgen.framework import fluid        # instead of: import paddle.fluid as fluid

Everything here is gradgen's own object under Paddle's name (the table in
``design_docs/coming_from_paddle.md``): ``fluid.data`` is ``layers.data``,
``fluid.Executor`` is ``Executor``, ``fluid.io.save_inference_model`` is
``framework.inference.save_inference_model``. One deliberate difference
from gradgen proper, in ``fluid.layers``: ``mean`` returns shape ``[1]``
as Paddle 1.x does, so ``avg_loss_value[0]`` works; gradgen's own layers
return 0-d scalars (read them with ``float(v)`` or ``v[()]``).
"""
from __future__ import annotations

from gradgen.program import Program, initializer
from gradgen.program.guard import default_main_program, default_startup_program, program_guard
from gradgen.program.layers import data
from gradgen.program.param_attr import ParamAttr

from ..data import DataFeeder
from ..passes.backward import append_backward, gradients
from ..runtime.executor import Executor
from ..runtime.place import CPUPlace
from ..runtime.scope import Scope, global_scope, scope_guard
from . import clip, core, io, layers, nets, optimizer, regularizer

__all__ = [
    "Program", "program_guard", "default_main_program", "default_startup_program", "data", "layers", "optimizer",
    "initializer", "ParamAttr", "Executor", "CPUPlace", "Scope", "global_scope", "scope_guard", "DataFeeder", "io", "core",
    "append_backward", "gradients", "nets", "regularizer", "clip",
]
