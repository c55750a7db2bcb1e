"""Plan-time compilation of a straight stretch of small ops into one numba function (a *region*).

Between the big products of a training step lie many small ops: on the seed
MLP, relu, a 64x100 by 100x10 product, the loss, its gradient, two more
small products, w2's update and relu_grad. Each costs a few microseconds of
Python and numpy call overhead for well under a microsecond of arithmetic:
together about 80 us of a 350 us step. A region runs such a stretch as one
generated function: one loop nest per elementwise op (``elementwise_exprs``
gives each element's expression, the same operations in the same order as the
op's kernel), ``np.dot`` for small products (numba calls BLAS on the calling
thread at that size), and the product-and-update pairs ``fusion`` made.

Walking the units in run order, consecutive units whose ops are all in
``_ADMITS`` and whose vars share one float dtype form a region; products whose
static size says they are big (counting a -1 dim as ``TYPICAL_BATCH``) stay
outside, on the chosen BLAS. The generated code checks every run-time shape
it relies on and raises if one does not fit (a -1 dim that broadcasts, a
product that turns out big); the region then runs op by op with the ordinary
kernels, as it does for its first ``warm_runs`` runs: never a wrong answer,
only a slower one. A region's outputs are the vars someone needs after it;
the rest never exist.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from . import jit
from .blas import SMALL_PRODUCT
from .elementwise_exprs import EXPRESSIONS, REDUCTIONS, full_reduction
from .compile_queue import Budget, LazyKernel
from .stretches import element_index, input_kind, needed_outputs, op_by_op, replace_stretches
from .fusion import is_gemm_update
from .kernels import KernelFactory
from .plan_data import Unit, static_size

__all__ = ["fuse_regions", "region_source"]

_FLOATS = ("float32", "float64")
_SMALL_ARRAY = 16384
"""Elements (a -1 dim counted as ``TYPICAL_BATCH``) above which a var keeps its ops out of regions: on big
arrays the ops' own work dwarfs the per-op overhead a region saves, and op by op they write into plan
buffers (the 50-layer MLP's 64x1024 activations stay out; the seed MLP's 64x100 ones go in)."""
_WORTH_COMPILING = 40e-6
"""Seconds per op, op by op in the fastest warm run, above which a region is not compiled: a second guard, for
arrays that are big at run time though small as declared. A region saves the per-op overhead (a few
microseconds an op); where the ops themselves take longer, that is little, while compiling costs a second or
two and importing numba about 130 MiB of resident memory. Measured: the seed MLP's region 11-12 us per op;
the 50-layer MLP's loss stretch on 256x1024, were it a region, 125 us per op."""


_TRIALS = 3
"""Calls of a compiled region that are timed, to compare with the ops one by one."""
_MOST_UNITS = 128
"""Units in one region at most: numba's compile time grows faster than a function's length, and a region
saves a few microseconds an op whatever its length (a long chain of small ops becomes several regions)."""


def _shape(block, name: str) -> tuple:
    return tuple(block.var(name).shape)


def _small_product(block, prod) -> bool:
    """True for a 2-D product whose multiply-adds, a -1 dim counted as ``TYPICAL_BATCH``, are few enough for
    the calling thread (``blas.SMALL_PRODUCT``)."""
    sx, sy = _shape(block, prod.input("X")[0]), _shape(block, prod.input("Y")[0])
    if len(sx) != 2 or len(sy) != 2:
        return False
    n = sy[0] if prod.attr("transpose_y") else sy[1]
    return static_size(sx) * static_size((n,)) <= SMALL_PRODUCT


def _admits(block, unit: Unit, dtype: str) -> bool:
    """True when ``unit`` can run inside a region of float ``dtype``: its vars are of that dtype and small."""
    names = (*unit.ins, *unit.outs)
    if any(block.var(n).dtype != dtype or static_size(_shape(block, n)) > _SMALL_ARRAY for n in names):
        return False
    if is_gemm_update(block, unit):
        return _small_product(block, block.ops[unit.ops[0]])
    if len(unit.ops) != 1 or unit.kernel is not None:
        return False
    op = block.ops[unit.index]
    if op.type == "matmul":
        return _small_product(block, op)
    if op.type in REDUCTIONS:
        return full_reduction(op, len(_shape(block, op.input("X")[0])))
    if op.type == "fill_any_like":
        return True
    if op.type == "reduce_as":
        return _shape(block, op.input("X")[0]) == _shape(block, op.input("Target")[0])
    if op.type == "broadcast_to":
        return bool(op.input("ShapeLike")) and input_kind(_shape(block, op.input("X")[0]),
                                                           _shape(block, op.input("ShapeLike")[0])) is not None
    if op.type in EXPRESSIONS:
        shape = _shape(block, unit.outs[0])
        return (bool(shape) and all(_shape(block, n) == shape for n in unit.outs)
                and _reference(block, op, shape) is not None)
    return False


def _reference(block, op, shape: tuple) -> str | None:
    """The input of ``op`` whose run-time shape is the output's (declared the same), or None."""
    kinds = {n: input_kind(_shape(block, n), shape) for n in op.input_arg_names}
    if any(k is None for k in kinds.values()):
        return None
    return next((n for n, k in kinds.items() if k == "full"), None)


def fuse_regions(block, units: Sequence[Unit], keep: set, kernels: Mapping[str, KernelFactory],
                 warm_runs: int = 0, background: bool = True) -> list[Unit]:
    """``units`` with every stretch of at least two region-able units replaced by one unit running a generated
    function, compiled on the compile worker (``compile_queue``) after ``warm_runs`` runs op by op; with
    ``background`` False, the run that asks waits for it. Without numba, ``units`` unchanged."""
    if not jit.AVAILABLE:
        return list(units)
    budget = Budget()

    def region_at(at: int, readers: Mapping[str, list[int]]) -> tuple[Unit | None, int]:
        dtype = _dtype(block, units[at])
        end = at
        while dtype is not None and end < len(units) and end - at < _MOST_UNITS and _admits(block, units[end], dtype):
            end += 1
        return (_region_unit(block, units[at:end], end, readers, keep, kernels, warm_runs, background, budget)
                if end - at > 1 else None), end

    return replace_stretches(units, region_at)


def _dtype(block, unit: Unit) -> str | None:
    dtypes = {block.var(n).dtype for n in unit.outs}
    return dtypes.pop() if len(dtypes) == 1 and next(iter(dtypes), None) in _FLOATS else None


def _region_unit(block, members: Sequence[Unit], end: int, readers, keep: set, kernels,
                 warm_runs: int, background: bool, budget: Budget) -> Unit | None:
    """The unit running ``members`` as one region; None when nothing it makes is needed afterwards."""
    made: set[str] = set()
    ins: dict[str, None] = {}
    for unit in members:
        ins.update((n, None) for n in unit.ins if n not in made)
        made.update(unit.outs)
    outs = needed_outputs(block, members, end, readers, keep)
    if not outs:
        return None
    source = partial(region_source, block, members, tuple(ins), tuple(outs))  # written only if compiled
    fallback = op_by_op(block, members, tuple(ins), tuple(outs), kernels)
    ops = tuple(i for u in members for i in u.ops)
    return Unit(index=members[-1].index, ops=ops, ins=tuple(ins), outs=tuple(outs),
                kernel=_runner(block, ops, tuple(outs), source, fallback, warm_runs, background, budget))


class _Writer:
    """The generated function's lines and the local name of every var."""

    def __init__(self, block, ins: Sequence[str]):
        self.block = block
        self.names = {name: f"a{k}" for k, name in enumerate(ins)}
        self.args = tuple(self.names.values())  # an update's output takes its input's name: keep the arguments
        self.lines: list[str] = []
        self.count = 0

    def new(self, name: str) -> str:
        local = self.names[name] = f"v{self.count}"
        self.count += 1
        return local

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)


def _loop_shape(block, unit: Unit) -> tuple | None:
    """The declared output shape of a unit that is one elementwise op (it can share a loop nest), else None."""
    if len(unit.ops) != 1 or unit.kernel is not None or block.ops[unit.index].type not in EXPRESSIONS:
        return None
    return _shape(block, unit.outs[0])


def _loop_nest(w: _Writer, units: Sequence[Unit], shape: tuple, needed: set) -> None:
    """Consecutive elementwise ``units`` of one output shape as one loop nest over the first one's reference
    input: each element's value of a var made here lives in a scalar, stored to an array only when ``needed``
    after the nest. Every outside input's run-time shape is checked first."""
    rank, block = len(shape), w.block
    first = block.ops[units[0].index]
    base = w.names[_reference(block, first, shape)]  # before an output (an update's) takes the name over
    made: dict[str, str] = {}  # var made in the nest -> its scalar
    checked: set[str] = set()
    body: list[str] = []
    stores: list[tuple[str, str]] = []

    def read(name: str) -> str:
        if name in made:
            return made[name]
        kind, declared, local = input_kind(_shape(block, name), shape), _shape(block, name), w.names[name]
        if name not in checked:
            checked.add(name)
            if kind == "full" and local != base:
                w.emit(f"if {local}.shape != {base}.shape: raise ValueError('shape')")
            elif kind == "bcast":
                lead = rank - len(declared)
                for j, d in enumerate(declared):
                    want = "1" if d == 1 else f"{base}.shape[{lead + j}]"
                    w.emit(f"if {local}.shape[{j}] != {want}: raise ValueError('shape')")
            elif kind == "one":
                w.emit(f"if {local}.size != 1: raise ValueError('shape')")
                w.emit(f"{local}_s = {local}.ravel()[0]")
        return f"{local}_s" if kind == "one" else local + element_index(kind, declared, shape)

    for unit in units:
        op = block.ops[unit.index]
        exprs = EXPRESSIONS[op.type](op, lambda slot, op=op: read(op.input(slot)[0]))
        for slot, expr in exprs.items():
            name = op.output(slot)[0]
            scalar = f"e{w.count}"
            w.count += 1
            body.append(f"{scalar} = {expr}")
            made[name] = scalar
            if name in needed:
                stores.append((name, scalar))
    index = "[" + ", ".join(f"i{d}" for d in range(rank)) + "]"
    arrays = {}
    for name, scalar in stores:
        arrays[name] = w.new(name)
        w.emit(f"{arrays[name]} = np.empty({base}.shape, lit)")
    for d in range(rank):
        w.emit(f"for i{d} in range({base}.shape[{d}]):", 1 + d)
    for line in body:
        w.emit(line, 1 + rank)
    for name, scalar in stores:
        w.emit(f"{arrays[name]}{index} = {scalar}", 1 + rank)


def _product(w: _Writer, x: str, y: str, tx: bool, ty: bool) -> str:
    """Checks that the run-time product is small, and returns its expression."""
    a = f"{w.names[x]}.T" if tx else w.names[x]
    b = f"{w.names[y]}.T" if ty else w.names[y]
    w.emit(f"if {a}.shape[0] * {a}.shape[1] * {b}.shape[1] > {SMALL_PRODUCT}: raise ValueError('big product')")
    return f"np.dot({a}, {b})"


def _emit(w: _Writer, unit: Unit) -> None:
    block = w.block
    if is_gemm_update(block, unit):
        prod, upd = block.ops[unit.ops[0]], block.ops[unit.ops[1]]
        product = _product(w, prod.input("X")[0], prod.input("Y")[0], prod.attr("transpose_x"),
                           prod.attr("transpose_y"))
        w.emit(f"t = {product}")  # as ``blas.gemm`` computes a small fused update: alpha * (A B), then onto C
        w.emit(f"t *= -{w.names[upd.input('LearningRate')[0]]}.ravel()[0]")
        param = w.names[upd.input("Param")[0]]  # before the output takes the name over
        w.emit(f"{w.new(upd.output('ParamOut')[0])} = {param} + t")
        return
    op = block.ops[unit.index]
    if op.type == "matmul":
        product = _product(w, op.input("X")[0], op.input("Y")[0], op.attr("transpose_x"), op.attr("transpose_y"))
        w.emit(f"{w.new(op.output('Out')[0])} = {product}")
    elif op.type in REDUCTIONS:
        x = w.names[op.input("X")[0]]
        rank = len(_shape(block, op.input("X")[0]))
        w.emit("acc = 0.0")  # accumulated in float64 whatever the dtype, as the elementwise groups do
        for d in range(rank):
            w.emit(f"for i{d} in range({x}.shape[{d}]):", 1 + d)
        w.emit(f"acc += {x}[{', '.join(f'i{d}' for d in range(rank))}]", 1 + rank)
        if op.type == "reduce_mean":
            w.emit(f"acc /= {x}.size")  # IEEE division (``jit.module_head``): the mean of nothing is nan, as numpy's
        out = op.output("Out")[0]
        local = w.new(out)
        w.emit(f"{local} = np.empty({_shape(block, out)!r}, lit)")
        w.emit(f"{local}.reshape(1)[0] = acc")
    elif op.type == "fill_any_like":
        w.emit(f"{w.new(op.output('Out')[0])} = np.full({w.names[op.input('X')[0]]}.shape, "
               f"lit({float(op.attr('value'))!r}))")
    elif op.type == "reduce_as":
        x, target = w.names[op.input("X")[0]], w.names[op.input("Target")[0]]
        w.emit(f"if {x}.shape != {target}.shape: raise ValueError('shape')")
        w.names[op.output("Out")[0]] = x
    elif op.type == "broadcast_to":
        x, like = w.names[op.input("X")[0]], w.names[op.input("ShapeLike")[0]]
        w.emit(f"{w.new(op.output('Out')[0])} = np.ascontiguousarray(np.broadcast_to({x}, {like}.shape))")


def region_source(block, members: Sequence[Unit], ins: Sequence[str], outs: Sequence[str]) -> str:
    """The numba module text of a region: ``kernel(*inputs)`` returning its outputs as a tuple."""
    dtype = _dtype(block, members[0])
    w = _Writer(block, ins)
    segments: list[tuple[tuple | None, list[Unit]]] = []
    for unit in members:
        shape = _loop_shape(block, unit)
        if shape is not None and segments and segments[-1][0] == shape:
            segments[-1][1].append(unit)
        else:
            segments.append((shape, [unit]))
    last_read = {n: at for at, (_, units) in enumerate(segments) for u in units for n in u.ins}
    for at, (shape, units) in enumerate(segments):
        w.emit("# " + ", ".join(f"#{i} {block.ops[i].type}" for u in units for i in u.ops))
        if shape is None:
            _emit(w, units[0])
            continue
        needed = set(outs) | {n for u in units for n in u.outs if last_read.get(n, -1) > at}
        _loop_nest(w, units, shape, needed)
    w.emit(f"return ({''.join(w.names[n] + ', ' for n in outs)})")
    return jit.module_head(dtype) + "\n".join([f"def kernel({', '.join(w.args)}):"] + w.lines) + "\n"


def _runner(block, ops: tuple[int, ...], outs: Sequence[str], source: Callable[[], str], fallback, warm_runs: int,
            background: bool, budget: Budget):
    """The step function: the ops one by one for the first ``warm_runs`` runs, then, if those runs showed it
    worth compiling (``_WORTH_COMPILING``) and the plan's ``budget`` (ops left to compile) allows, the region is
    asked of the compile worker, and the ops run one by one until it is ready. Its first ``_TRIALS`` calls are
    timed: a region no faster than the fastest timed run op by op is dropped (numba's scalar ``tanh`` loses to
    numpy's vectorised one on a 32x128 array). Op by op whenever the compiled region refuses its run-time
    shapes or argument types."""
    types = ", ".join(f"#{i} {block.ops[i].type}" for i in ops)
    lazy = LazyKernel(source, f"block {block.idx}: region {types}", background)
    state: list[Any] = [warm_runs, None, _TRIALS, None]  # runs left before deciding, fastest op by op,
    many = len(outs) > 1                                 # compiled calls left to time, fastest compiled

    def timed(fn, arrays, slot: int):
        start = time.perf_counter()
        result = fn(*arrays)
        took = time.perf_counter() - start
        state[slot] = took if state[slot] is None else min(state[slot], took)
        return result

    def run(*arrays):
        kernel = lazy.kernel
        if kernel is None and lazy.pending is not None:
            kernel = lazy.poll()
        if kernel is not None:
            try:
                if state[2] <= 0:
                    results = kernel(*arrays)
                else:
                    results = timed(kernel, arrays, 3)
                    state[2] -= 1
                    if state[2] == 0 and state[1] is not None and state[3] >= state[1]:
                        lazy.kernel = None  # measured no faster than op by op: dropped
            except (ValueError, TypeError):  # a shape the region does not cover; types it was not compiled for
                return fallback(*arrays)
            return results if many else results[0]
        if state[0] < 0:  # decided: compiling (timed, to compare with the region), or not compiled
            return timed(fallback, arrays, 1) if lazy.pending is not None else fallback(*arrays)
        if state[0] > 0:
            state[0] -= 1
            return timed(fallback, arrays, 1)
        state[0] = -1
        worth = state[1] is None or state[1] <= _WORTH_COMPILING * len(ops)  # else the ops' own work dominates
        if worth and budget.take(len(ops)):
            lazy.start(arrays)
            if lazy.kernel is not None:
                return run(*arrays)
        return fallback(*arrays)

    run.fused_ops = ops  # what ``gradgen show --plan`` reports
    run.region = True
    run.lazy = lazy  # its compile, for tests, tools and profiles
    run.compiled = lambda: lazy.poll() is not None
    return run
