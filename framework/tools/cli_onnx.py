"""The ``gradgen`` commands for ONNX: ``export-onnx`` and ``import-onnx``."""
from __future__ import annotations

import os

from .cli_files import load_program as _load
from .cli_files import params_beside
from .cli_values import CliError, parse_names
from .cli_values import program_var as _var

__all__ = ["add_commands", "cmd_export_onnx", "cmd_import_onnx"]


def cmd_export_onnx(args) -> int:
    from .onnx import export_onnx

    program = _load(args.program)
    params = None
    if args.params:
        from ..io import load_params
        from ..runtime.scope import Scope

        if not os.path.exists(args.params):
            raise CliError(f"no such parameter file: {args.params}")
        params = Scope()
        load_params(args.params, program, params, strict=False)
    fetch = parse_names(args.fetch) if args.fetch else None
    for name in fetch or ():
        _var(program, name, "fetched var")
    model = export_onnx(program, args.output, params=params, fetch_list=fetch, include_updates=not args.no_updates,
                        single_process=args.single_process)
    from .onnx.export import OPSET  # only now: without the onnx extra, export_onnx has said what to install
    print(f"wrote {args.output} (ONNX opset {OPSET}, {len(model.graph.node)} nodes; "
          f"inputs: {', '.join(i.name for i in model.graph.input) or '-'}; "
          f"outputs: {', '.join(o.name for o in model.graph.output)})")
    return 0


def cmd_import_onnx(args) -> int:
    from .onnx import import_onnx

    if not os.path.exists(args.model):
        raise CliError(f"no such model file: {args.model}")
    program, params, outputs = import_onnx(args.model, max_constant_bytes=args.max_constant_bytes,
                                           max_loop_iterations=args.max_loop_iterations,
                                           bn_running_variance=args.bn_running_variance)
    program.save(args.output)
    written = ""
    if params:
        beside = params_beside(args.output)  # where `gradgen run` looks for them
        out = args.params_out or beside
        from ..io import save_params
        from ..runtime.scope import Scope

        scope = Scope()
        for name, value in params.items():
            scope.set(name, value)
        save_params(out, program, scope)
        written = f" and {out} ({len(params)} parameters{'' if out == beside else '; run it with --params ' + out})"
    print(f"wrote {args.output}{written}; outputs: " + ", ".join(f"{k} -> {v}" for k, v in outputs.items()))
    return 0


def add_commands(sub) -> None:
    """Add ``export-onnx`` and ``import-onnx`` to the CLI's subcommand parsers ``sub``."""
    from gradgen.program.ops.network import RUNNING_VARIANCES

    from .onnx.limits import ImportLimits

    p = sub.add_parser("export-onnx", help="write a program as an ONNX model (opset 17)")
    p.add_argument("program")
    p.add_argument("--params", help="a parameter file (.npz): its arrays become initializers")
    p.add_argument("--fetch", help="comma-separated vars to output (default: vars written and never read)")
    p.add_argument("--no-updates", action="store_true", help="do not output the new values of persistable vars")
    p.add_argument("--single-process", action="store_true",
                   help="a data-parallel program as one process runs it (its collective ops move no data)")
    p.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    p.set_defaults(run=cmd_export_onnx)

    p = sub.add_parser("import-onnx", help="read an ONNX model as a program (initializers become parameters)")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, help="the program file (.json) to write")
    p.add_argument("--params-out", help="where to write the parameters (default: OUTPUT with .params.npz)")
    p.add_argument("--max-constant-bytes", type=int, default=ImportLimits.max_constant_bytes,
                   help="the largest tensor the import may make from the model's declared sizes "
                        "(default: %(default)s bytes)")
    p.add_argument("--max-loop-iterations", type=int, default=ImportLimits.max_loop_iterations,
                   help="the most steps a Loop may take at run time (default: %(default)s)")
    p.add_argument("--bn-running-variance", choices=RUNNING_VARIANCES,
                   help="what a training-mode BatchNormalization's running variance moves toward: the batch's "
                        "population variance (ONNX's rule) or its unbiased one (PyTorch's); default: unbiased "
                        "for a model PyTorch exported, population for any other")
    p.set_defaults(run=cmd_import_onnx)
