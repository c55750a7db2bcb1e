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

from gradgen.program import Program
from gradgen.program.errors import GradgenError

from .cli_values import describe_array, load_feeds, parse_names, parse_shape_args


class CliError(GradgenError):
    """A command-line mistake: a missing file, an unknown var name, a malformed argument."""


def _version() -> str:
    try:
        return metadata.version("gradgen")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _load(path: str) -> Program:
    if not os.path.exists(path):
        raise CliError(f"no such program file: {path}")
    return Program.load(path)


def _var(program: Program, name: str, what: str):
    var = program.global_block().find_var(name)
    if var is None:
        names = ", ".join(sorted(program.global_block().vars)[:12])
        raise CliError(f"{what} '{name}' is not a var of the program's global block (vars: {names}, ...)")
    return var


def _progress(steps: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(range(steps), disable=not enabled, unit="step", dynamic_ncols=True, file=sys.stderr)


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


def cmd_example(args) -> int:
    from .. import Executor, Scope
    from .examples import EXAMPLES
    from ..io import save_params

    if args.list or args.name is None:
        for name, build in EXAMPLES.items():
            print(f"{name:<8} {build().description}")
        return 0
    if args.name not in EXAMPLES:
        raise CliError(f"unknown example '{args.name}' (known: {', '.join(EXAMPLES)})")
    ex = EXAMPLES[args.name]()
    print(f"# {ex.name}: {ex.description}\n")
    print("## forward program\n")
    print(ex.main)
    from gradgen.program import program_guard

    with program_guard(ex.main, ex.startup):
        ex.make_optimizer().minimize(ex.loss)
    print("## after append_backward and the optimizer (generated ops name the forward op they came from)\n")
    print(ex.main)
    exe, scope = Executor(), Scope()
    exe.run(ex.startup, scope=scope)
    steps = ex.steps if args.steps is None else args.steps
    first = last = None
    bar = _progress(steps, not args.quiet)
    for step in bar:
        (loss,) = exe.run(ex.main, feed=ex.feed, fetch_list=[ex.loss], scope=scope)
        last = float(loss)
        first = last if first is None else first
        if step % 10 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{last:.6g}")
    bar.close()
    if steps:
        print(f"loss: {first:.6g} at step 1 -> {last:.6g} at step {steps}")
    out = args.out or f"gradgen-{ex.name}"
    os.makedirs(out, exist_ok=True)
    ex.main.save(os.path.join(out, "main.json"))
    ex.startup.save(os.path.join(out, "startup.json"))
    save_params(os.path.join(out, "params.npz"), ex.main, scope)
    for name, value in ex.feed.items():
        np.save(os.path.join(out, f"{name}.npy"), value)
    print(f"wrote {out}/main.json, startup.json, params.npz and " + ", ".join(f"{n}.npy" for n in ex.feed))
    return 0


def cmd_show(args) -> int:
    program = _load(args.program)
    if args.block is None:
        print(program, end="")
        return 0
    from gradgen.program.printer import block_to_lines

    block = program.block(args.block)
    positions = {id(op): (b.idx, i) for b in program.blocks for i, op in enumerate(b.ops)}
    print(f"block {block.idx} (parent {block.parent_idx}):")
    print("\n".join(block_to_lines(block, "  ", positions, set())))
    return 0


def cmd_backward(args) -> int:
    from .. import append_backward, gradients

    program = _load(args.program)
    loss = _var(program, args.loss, "loss")
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


def _prepare(args):
    """Load the program, run the startup program and load params if given; return (program, executor, scope)."""
    from .. import Executor, Scope
    from ..io import load_params

    program = _load(args.program)
    exe, scope = Executor(), Scope()
    if args.startup:
        exe.run(_load(args.startup), scope=scope)
    if args.params:
        if not os.path.exists(args.params):
            raise CliError(f"no such parameter file: {args.params}")
        load_params(args.params, program, scope, strict=False)
    return program, exe, scope


def cmd_run(args) -> int:
    from ..io import save_params

    program, exe, scope = _prepare(args)
    feed = load_feeds(args.feed)
    for name in feed:
        _var(program, name, "fed var")
    fetch = parse_names(args.fetch)
    for name in fetch:
        _var(program, name, "fetched var")
    if args.memory:
        from .memory import analyze_memory, memory_text

        print(memory_text(analyze_memory(program, {k: v.shape for k, v in feed.items()}, fetch)), end="")
    values = []
    for _ in _progress(args.steps, args.steps > 1):
        values = exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
    for name, value in zip(fetch, values):
        print(f"{name}: {describe_array(value)}")
    if args.save_params:
        written = save_params(args.save_params, program, scope)
        print(f"wrote {args.save_params} ({len(written)} vars)")
    return 0


def _print_custom_rules(program) -> None:
    """Name the custom gradient rules: a gradient through one is the user's rule, not the forward body's."""
    from .custom_gradients import custom_rules

    for block, index, rule in custom_rules(program):
        print(f"custom rule '{rule}' (block {block}, op #{index}): gradients through it follow the rule; "
              "a mismatch there may be by design (check_custom_gradient compares the rule alone)")


def cmd_check_grad(args) -> int:
    from .. import gradients
    from .gradcheck import check_gradients

    program, exe, scope = _prepare(args)
    feed = load_feeds(args.feed)
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
    reports = check_gradients(program, loss.name, pairs, feed, scope, rtol=args.rtol, atol=args.atol)
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


def cmd_dot(args) -> int:
    program = _load(args.program)
    text = program.to_dot(args.block)
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
        subprocess.run([dot, f"-T{fmt}", "-o", args.output], input=text.encode(), check=True)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {args.output}")
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

    print(summary_text(_load(args.program), parse_shape_args(args.feed_shape)), end="")
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
    values = load_feeds(args.feed)
    for name in values:
        _var(program, name, "fed var")
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

    p = sub.add_parser("example", help="train a built-in example model (the main job)")
    p.add_argument("name", nargs="?", help="the model: see --list")
    p.add_argument("--list", action="store_true", help="list the built-in models")
    p.add_argument("--steps", type=int, help="training steps (default: the model's own)")
    p.add_argument("--out", help="directory for the program and parameter files (default: ./gradgen-NAME)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_example)

    p = sub.add_parser("show", help="print a program file")
    p.add_argument("program")
    p.add_argument("--block", type=int, help="print only this block")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("backward", help="append the backward part to a program file")
    p.add_argument("program")
    p.add_argument("--loss", required=True, help="the var to differentiate")
    p.add_argument("--wrt", help="comma-separated vars (default: every trainable parameter)")
    p.add_argument("--no-grad", help="comma-separated vars that get and pass no gradient")
    p.add_argument("-o", "--output", required=True, help="where to write the result")
    p.set_defaults(run=cmd_backward)

    def runtime_options(p):
        p.add_argument("program")
        p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy", help="a feed (repeatable)")
        p.add_argument("--startup", help="a startup program to run first (initializes parameters)")
        p.add_argument("--params", help="a parameter file (.npz) to load")

    p = sub.add_parser("run", help="run a program file and print fetched values")
    runtime_options(p)
    p.add_argument("--fetch", required=True, help="comma-separated vars to fetch")
    p.add_argument("--steps", type=int, default=1, help="run this many times (e.g. training steps)")
    p.add_argument("--save-params", help="write the persistable vars to this .npz after the run")
    p.add_argument("--memory", action="store_true", help="first print the bytes live after each op and the peak")
    p.set_defaults(run=cmd_run)

    p = sub.add_parser("check-grad", help="compare generated gradients with finite differences")
    runtime_options(p)
    p.add_argument("--loss", required=True, help="the scalar var to differentiate")
    p.add_argument("--wrt", help="comma-separated vars (default: floating-point feeds and parameters)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-7)
    p.set_defaults(run=cmd_check_grad)

    p = sub.add_parser("dot", help="write the dataflow graph of a block as Graphviz DOT (or SVG/PNG)")
    p.add_argument("program")
    p.add_argument("-o", "--output", required=True, help="FILE.dot, or FILE.svg / FILE.png to render")
    p.add_argument("--block", type=int, default=0)
    p.set_defaults(run=cmd_dot)

    p = sub.add_parser("ops", help="list every op type, whether it is differentiable and its grad ops")
    p.set_defaults(run=cmd_ops)

    p = sub.add_parser("summary", help="op counts, parameter count and the bytes of every var")
    p.add_argument("program")
    p.add_argument("--feed-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="a feed's shape, to size the -1 dims (repeatable)")
    p.set_defaults(run=cmd_summary)

    p = sub.add_parser("modes", help="build reverse and forward mode for a program and compare them in numbers")
    p.add_argument("program")
    p.add_argument("--outputs", required=True, help="comma-separated vars to differentiate")
    p.add_argument("--wrt", required=True, help="comma-separated vars to differentiate with respect to")
    p.add_argument("--feed-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="a feed's shape, to size the -1 dims (repeatable)")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a value to feed instead of random numbers (a loop count, labels; repeatable)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per mode (the median is reported)")
    p.set_defaults(run=cmd_modes)
    return parser


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
    except (GradgenError, OSError, ValueError) as e:
        if args.debug:
            raise
        message = "; ".join(line.strip() for line in str(e).splitlines() if line.strip()) or type(e).__name__
        print(f"gradgen: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
