"""The ``gradgen`` command: train the built-in examples, and inspect, differentiate and run program files.

Every error reaches the user as one line on stderr and a non-zero exit code;
``--debug`` shows the traceback instead.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Sequence

import numpy as np

from gradgen.program.errors import GradgenError

from . import cli_onnx, cli_parallel, cli_run
from .cli_feeds import program_feeds
from .cli_files import load_program as _load
from .cli_run import backend_option, check_values, prepare, progress, runtime_options
from .cli_values import CliError, parse_names, parse_shape_args
from .cli_values import program_var as _var


SWEEP_WARNING = 10_000
"""check-grad warns before sweeping more elements than this (each costs two runs of the program)."""

SCREENSHOT_HELP = ("A picture of the page without a display: chromium --headless --no-sandbox --window-size=1600,1200 "
                   "--screenshot=page.png file://$PWD/page.html (as root Chromium will not start without "
                   "--no-sandbox; as another user leave it out and keep the sandbox).")
"""The end of ``gradgen explain --help`` (design_docs/explain.md says the same)."""


def _version() -> str:
    try:
        return metadata.version("gradgen")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _register_user_ops(items: list[str]) -> None:
    """Run each file (or import each module) given with --ops: the user's own register_op calls."""
    import importlib
    import runpy

    for item in items:
        if item.endswith(".py"):
            if not os.path.exists(item):
                raise CliError(f"no such ops file: {item}")
            runpy.run_path(item, run_name="gradgen_user_ops")
        else:
            try:
                importlib.import_module(item)
            except ImportError as e:
                raise CliError(f"--ops {item}: cannot import it ({e})") from None


# -- subcommands ------------------------------------------------------------------------------------------------


def cmd_show(args) -> int:
    program = _load(args.program)
    if args.backend != "numpy":
        return _show_lowered(program, args)
    if args.plan:
        return _show_plan(program, args)
    if args.block is None:
        print(program, end="")
        return 0
    from gradgen.program.printer import block_to_lines

    block = program.block(args.block)
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    print(f"block {block.idx} (parent {block.parent_idx}):")
    print("\n".join(block_to_lines(block, "  ", positions, set())))
    return 0


def _show_plan(program, args) -> int:
    from .plan_listing import plan_lines

    block = program.block(args.block or 0)
    feeds = parse_names(args.feed) if args.feed else None
    print("\n".join(plan_lines(block, feeds, parse_names(args.fetch) if args.fetch else ())))
    return 0


def cmd_backward(args) -> int:
    from .. import append_backward, gradients

    program = _load(args.program)
    loss = _var(program, args.loss, "loss")
    if any(d != 1 for d in loss.shape):
        raise CliError(f"--loss '{loss.name}' is {loss.type_str()}: a loss is one number (shape [] or [1]); reduce "
                       "it first (layers.reduce_sum or reduce_mean), as check-grad also needs")
    no_grad = parse_names(args.no_grad)
    for n in no_grad:
        _var(program, n, "--no-grad var")
    if args.wrt:
        wrt = [_var(program, n, "--wrt var") for n in parse_names(args.wrt)]
        grads = gradients(loss, wrt, no_grad_set=no_grad)
        pairs = list(zip(wrt, grads))
    else:
        pairs = append_backward(loss, no_grad_set=no_grad)
    program.save(args.output)
    for var, grad in pairs:
        print(f"{var.name} -> {grad.name if grad is not None else 'no gradient (the loss does not depend on it)'}")
    added = sum(1 for op in program.global_block().ops if op.role == "backward")
    print(f"wrote {args.output} ({added} backward ops)")
    return 0


def _show_lowered(program, args) -> int:
    """The program as an engine runs it (``lowered_text``): xla's StableHLO, every instruction located at the
    gradgen op it came from; the torch engine's steps and their kernels."""
    from ..backend import load_backend
    from .plan_listing import default_feeds

    backend = load_backend(args.backend)
    block = program.global_block()
    found = backend.problems(block)
    if found:
        raise CliError(f"the {args.backend} backend cannot run this program:\n  " + "\n  ".join(found))
    feeds = parse_names(args.feed) if args.feed else list(default_feeds(block))
    print(backend.lowered_text(program, feeds, parse_names(args.fetch) if args.fetch else ()), end="")
    return 0


def cmd_prune(args) -> int:
    from .. import Scope
    from ..io import load_params, save_params
    from ..passes.prune import prune, required_inputs

    program = _load(args.program)
    fetch = parse_names(args.fetch)
    if not fetch:
        raise CliError("--fetch needs at least one var name")
    feeds = parse_names(args.feed) if args.feed else None
    pruned = prune(program, fetch, feeds=feeds, for_test=not args.keep_training_ops)
    pruned.save(args.output)
    block = pruned.global_block()
    needs, persistables = required_inputs(block)
    print(f"kept {len(block.ops)} of {len(program.global_block().ops)} ops; feeds: {', '.join(needs) or 'none'}; "
          f"persistables read: {', '.join(persistables) or 'none'}")
    print(f"wrote {args.output}")
    if args.params:
        if not os.path.exists(args.params):
            raise CliError(f"no such parameter file: {args.params}")
        scope = Scope()
        load_params(args.params, program, scope, strict=False)
        out = args.params_out or os.path.splitext(args.output)[0] + ".npz"
        written = save_params(out, pruned, scope) if persistables else []
        missing = [n for n in persistables if n not in written]
        if missing:
            raise CliError(f"{args.params} holds no value for {', '.join(missing)}, which the pruned program reads")
        print(f"wrote {out} ({len(written)} vars)")
    return 0


def _print_custom_rules(program) -> None:
    """Name the custom gradient rules: a gradient through one is the user's rule, not the forward body's."""
    from .custom_gradients import custom_rules

    for block, index, rule in custom_rules(program):
        print(f"custom rule '{rule}' (block {block}, op #{index}): gradients through it follow the rule; "
              "a mismatch there may be by design (check_custom_gradient compares the rule alone)")


def cmd_check_grad(args) -> int:
    from .. import gradients
    from .gradcheck import check_gradients, tolerances_for

    program, exe, scope, _ = prepare(args)
    feed = program_feeds(program, args.feed, args.cast)
    check_values(program, scope, feed)
    loss = _var(program, args.loss, "loss")
    if args.wrt:
        wrt = [_var(program, n, "--wrt var") for n in parse_names(args.wrt)]
    else:
        wrt = [program.global_block().var(n) for n in feed if program.global_block().var(n).dtype.startswith("float")]
        wrt += [p for p in program.all_parameters() if p.trainable]
    if not wrt:
        raise CliError("nothing to check: give --wrt, or feed a floating-point var")
    for var in wrt:
        if var.name not in feed and var.name not in scope:
            raise CliError(f"'{var.name}' has no value: feed it, or give --startup / --params")
    grads = gradients(loss, wrt)
    pairs = {v.name: g.name for v, g in zip(wrt, grads) if g is not None}
    chosen = tolerances_for([v.dtype for v in wrt] + [loss.dtype])
    delta = chosen.delta if args.delta is None else args.delta
    rtol = chosen.rtol if args.rtol is None else args.rtol
    atol = chosen.atol if args.atol is None else args.atol
    elements = sum(int(np.size(feed[n] if n in feed else scope[n])) for n in pairs)
    if elements > SWEEP_WARNING:
        print(f"gradgen: warning: checking {elements} elements runs the program {2 * elements} times; "
              "choose fewer vars with --wrt", file=sys.stderr)
    print(f"step {delta:g}, rtol {rtol:g}, atol {atol:g} ({', '.join(sorted({v.dtype for v in wrt}))}); "
          "rel error = |analytic - numeric| / (|numeric| + atol/rtol), ok when <= rtol")
    bar = progress(elements, elements > 100, "element")
    reports = check_gradients(program, loss.name, pairs, feed, scope, delta=delta, rtol=rtol, atol=atol,
                              on_element=bar.update)
    bar.close()
    print(f"{'var':<30} {'max abs error':>14} {'max rel error':>14}  result")
    for r in reports:
        print(f"{r.var:<30} {r.max_abs_error:>14.3e} {r.max_rel_error:>14.3e}  {'ok' if r.ok else 'MISMATCH'}")
    for v, g in zip(wrt, grads):
        if g is None:
            print(f"{v.name:<30} {'-':>14} {'-':>14}  no dependence")
    _print_custom_rules(program)
    bad = [r.var for r in reports if not r.ok]
    if bad:
        print(f"gradgen: gradient mismatch for {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def _check_output_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"cannot write {path}: no such directory {directory}")


def cmd_dot(args) -> int:
    program = _load(args.program)
    text = program.to_dot(args.block, args.rankdir)
    _check_output_dir(args.output)
    fmt = os.path.splitext(args.output)[1].lstrip(".").lower()
    if fmt in ("svg", "png", "pdf"):
        dot = shutil.which("dot")
        if dot is None:
            path = os.path.splitext(args.output)[0] + ".dot"
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"the Graphviz 'dot' binary is not installed: wrote DOT to {path}; "
                  f"render it with: dot -T{fmt} {path} -o {args.output}")
            return 0
        done = subprocess.run([dot, f"-T{fmt}", "-o", args.output], input=text.encode(), capture_output=True)
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
            raise CliError(f"Graphviz 'dot' could not write {args.output}: {reason}")
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {args.output}")
    return 0


def _program_and_feed_shapes(args):
    """The program file and its ``--feed-shape`` values, each naming a var of the program."""
    program = _load(args.program)
    shapes = parse_shape_args(args.feed_shape)
    for name in shapes:
        _var(program, name, "--feed-shape var")
    return program, shapes


def cmd_explain(args) -> int:
    from .explain import explain_page

    program, shapes = _program_and_feed_shapes(args)
    text = explain_page(program, shapes or None, title=os.path.basename(args.program), backend=args.backend)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output} ({len(text.encode()) / 1024:.0f} KiB); open it in a browser")
    return 0


def cmd_ops(args) -> int:
    from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
    from gradgen.grad_makers.tangents import TANGENT_RULES
    from gradgen.program import OP_SCHEMAS

    print(f"{'op type':<36} {'gradient':<18} grad ops emitted; tangent ops emitted (forward mode)")
    for op_type in sorted(OP_SCHEMAS):
        maker, rule = GRAD_MAKERS.get(op_type), TANGENT_RULES.get(op_type)
        if maker is not None:
            tangent = ", ".join(rule.emits) if rule is not None else "MISSING"
            print(f"{op_type:<36} {'differentiable':<18} {', '.join(maker.emits)}; {tangent}")
        else:
            kind = "none (declared)" if op_type in NON_DIFFERENTIABLE else "MISSING"
            print(f"{op_type:<36} {kind:<18} -")
    return 0


def cmd_summary(args) -> int:
    from .summary import summary_text

    program, shapes = _program_and_feed_shapes(args)
    print(summary_text(program, shapes), end="")
    return 0


def cmd_modes(args) -> int:
    from .modes import compare_modes, modes_text

    program = _load(args.program)
    outputs, wrt = parse_names(args.outputs), parse_names(args.wrt)
    for name in outputs:
        _var(program, name, "--outputs var")
    for name in wrt:
        _var(program, name, "--wrt var")
    if not outputs or not wrt:
        raise CliError("give --outputs and --wrt (comma-separated var names)")
    values = program_feeds(program, args.feed, args.cast)
    reports = compare_modes(program, outputs, wrt, parse_shape_args(args.feed_shape), args.repeats, values)
    print(modes_text(reports), end="")
    return 0


# -- the parser -------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradgen", description="A static graph compiler with separate "
                                     "gradient-op generation: build, differentiate, inspect and run programs.")
    parser.add_argument("--version", action="version", version=f"gradgen {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument("--ops", action="append", default=[], metavar="FILE.py|MODULE",
                        help="a Python file or module that registers user-defined ops (register_op); repeatable")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cli_run.add_commands(sub)  # example (the main job) first, then run

    p = sub.add_parser("show", help="print a program file")
    p.add_argument("program")
    p.add_argument("--block", type=int, help="print only this block")
    p.add_argument("--plan", action="store_true", help="list the steps the numpy engine (the reference) runs, one "
                   "per op, and the vars freed after each")
    backend_option(p, "xla: print the lowered program (StableHLO), each instruction located at the gradgen op it "
                      "came from (-1 dims as 1); torch: list the engine's steps, each with the kernel that runs it")
    p.add_argument("--feed", help="with --plan or --backend: the fed vars, comma-separated (default: every var no "
                   "op makes)")
    p.add_argument("--fetch", help="with --plan or --backend: the fetched vars, comma-separated")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("backward", help="append the backward part to a program file")
    p.add_argument("program")
    p.add_argument("--loss", required=True, help="the var to differentiate")
    p.add_argument("--wrt", help="comma-separated vars (default: every trainable parameter)")
    p.add_argument("--no-grad", help="comma-separated vars that get and pass no gradient")
    p.add_argument("-o", "--output", required=True, help="where to write the result")
    p.set_defaults(run=cmd_backward)

    p = sub.add_parser("prune", help="keep only the ops some vars need: an inference program (and its parameters)")
    p.add_argument("program")
    p.add_argument("--fetch", required=True, help="comma-separated vars the result must compute")
    p.add_argument("--feed", help="comma-separated vars to be fed (default: whatever the kept ops read)")
    p.add_argument("-o", "--output", required=True, help="where to write the pruned program")
    p.add_argument("--params", help="a parameter file (.npz): write the persistables the pruned program reads")
    p.add_argument("--params-out", help="where to write them (default: the output's name with .npz)")
    p.add_argument("--keep-training-ops", action="store_true",
                   help="allow backward/optimize ops and keep dropout/batch norm in training mode")
    p.set_defaults(run=cmd_prune)

    p = sub.add_parser("check-grad", help="compare generated gradients with finite differences")
    runtime_options(p)
    p.add_argument("--loss", required=True, help="the scalar var to differentiate")
    p.add_argument("--wrt", help="comma-separated vars (default: floating-point feeds and parameters)")
    p.add_argument("--delta", type=float, help="finite-difference step (default: by dtype, 1e-6 for float64, "
                   "1e-3 for float32)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default: by dtype, 1e-5 / 5e-2): an element "
                   "passes when |analytic - numeric| <= atol + rtol * |numeric|")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: by dtype, 1e-7 / 5e-3)")
    p.set_defaults(run=cmd_check_grad)

    p = sub.add_parser("dot", help="write the dataflow graph of a block as Graphviz DOT (or SVG/PNG)")
    p.add_argument("program")
    p.add_argument("-o", "--output", required=True, help="FILE.dot, or FILE.svg / FILE.png to render")
    p.add_argument("--block", type=int, default=0, help="draw only this block (and its sub-blocks)")
    p.add_argument("--rankdir", choices=["TB", "LR"], default="TB",
                   help="lay ops out top to bottom (default) or left to right")
    p.set_defaults(run=cmd_dot)

    p = sub.add_parser("explain", help="write an HTML page linking grad ops to forward ops and to memory",
                       epilog=SCREENSHOT_HELP)
    p.add_argument("program")
    p.add_argument("--feed-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="a feed's shape, to size the -1 dims of the memory timeline (repeatable; default 1)")
    p.add_argument("-o", "--output", required=True, help="the .html file to write")
    backend_option(p, "the engine the page says runs the program (default numpy)")
    p.set_defaults(run=cmd_explain)

    p = sub.add_parser("ops", help="list every op type, whether it is differentiable and its grad ops")
    p.set_defaults(run=cmd_ops)

    p = sub.add_parser("summary", help="op counts, parameter count and the bytes of every var")
    p.add_argument("program")
    p.add_argument("--feed-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="a feed's shape, to size the -1 dims (repeatable)")
    p.set_defaults(run=cmd_summary)

    cli_parallel.add_commands(sub)

    cli_onnx.add_commands(sub)

    p = sub.add_parser("modes", help="build reverse and forward mode for a program and compare them in numbers")
    p.add_argument("program")
    p.add_argument("--outputs", required=True, help="comma-separated vars to differentiate")
    p.add_argument("--wrt", required=True, help="comma-separated vars to differentiate with respect to")
    p.add_argument("--feed-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="a feed's shape, to size the -1 dims (repeatable)")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy|NAME=FILE.npz|FILE.npz",
                   help="a value to feed instead of random numbers (a loop count, labels; repeatable)")
    p.add_argument("--cast", action="store_true", help="convert a feed to its var's declared dtype (as run --cast)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per mode (the median is reported)")
    p.set_defaults(run=cmd_modes)
    for p in sub.choices.values():  # --debug after the subcommand too; SUPPRESS keeps one given before it
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of errors")
    return parser


def _one_line(message: str) -> str:
    """An error's lines as one (an error line is one line, for grep and logs): joined by "; ", or by a space
    after a line that ends with a colon (the list it introduces follows it)."""
    joined = ""
    for line in (line.strip() for line in message.splitlines()):
        if line:
            joined += line if not joined else (" " if joined.endswith(":") else "; ") + line
    return joined


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        _register_user_ops(args.ops)
        return args.run(args)
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, and the shell's exit code for SIGINT (128 + 2)
        if args.debug:
            raise
        print("gradgen: interrupted", file=sys.stderr)
        return 130
    except (GradgenError, OSError, ValueError) as e:
        if args.debug:
            raise
        print(f"gradgen: error: {_one_line(str(e)) or type(e).__name__}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
