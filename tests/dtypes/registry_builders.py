"""The shared parts of the registry cases (``Draw``, ``Built``, ``one_op``) and the builders of the elementwise,
reduction, creation and manipulation ops; ``registry_cases`` holds the rest and the ``CASES`` table."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
from hypothesis import strategies as st

from gradgen.program import OP_SCHEMAS, Operator, Program
from gradgen.program.dtypes import DTYPES, INT_DTYPES
from gradgen.program.ops.reduction import reduced_shape


class Built(NamedTuple):
    program: Program
    op: Operator
    feed: dict[str, np.ndarray]


class Draw:
    """Draws for one case: ``want`` fixes the dtype of one slot or dtype attr, the rest come from the schema."""

    def __init__(self, data: st.DataObject, op_type: str, want: dict[str, str]):
        self.data, self.schema, self.want = data, OP_SCHEMAS[op_type], want
        self.rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))

    def __call__(self, strategy):
        return self.data.draw(strategy)

    def dtype(self, key: str, among=None) -> str:
        if key in self.want:
            return self.want[key]
        return self(st.sampled_from(among or self.schema.dtypes[key]))

    def int(self, lo: int, hi: int) -> int:
        return self(st.integers(lo, hi))

    def flag(self) -> bool:
        return self(st.booleans())

    def shape(self, min_rank: int = 0, max_rank: int = 4, min_side: int = 0, max_side: int = 3) -> list[int]:
        rank = self.int(min_rank, max_rank)
        return self(st.lists(st.integers(min_side, max_side), min_size=rank, max_size=rank))

    def array(self, shape, dtype: str, lo: float = -3, hi: float = 3) -> np.ndarray:
        """Values on a grid of halves (ties and zeros are common), ints in [lo, hi], bools at random."""
        if dtype == "bool":
            return self.rng.random(shape) < 0.5
        if dtype in INT_DTYPES:
            return self.rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
        return (np.round(self.rng.uniform(lo, hi, size=shape) * 2) / 2).astype(dtype)

    def broadcast_pair(self, max_rank: int = 4) -> tuple[list[int], list[int]]:
        """Two shapes that broadcast: one, and a suffix of it with some dims set to 1 (in either order)."""
        a = self.shape(max_rank=max_rank)
        b = [1 if self.flag() else d for d in a[self.int(0, len(a)):]]
        return (a, b) if self.flag() else (b, a)


def one_op(g: Draw, inputs: dict[str, Any], attrs: dict | None = None, outputs: dict[str, int] | None = None,
           known: tuple[str, ...] = ()) -> Built:
    """The op alone in block 0: a var per input array, declared with some dims -1 (not in the slots ``known``)."""
    main = Program()
    block, feed, ins = main.global_block(), {}, {}
    for slot, value in inputs.items():
        names = []
        for k, v in enumerate(value if isinstance(value, list) else [value]):
            name = f"{slot.lower().replace('@', '_')}_{k}"
            shape = [-1 if slot not in known and g.int(0, 3) == 0 else d for d in v.shape]
            block.create_var(name, shape, v.dtype.name)
            feed[name], names = v, names + [name]
        ins[slot] = names
    counts = outputs or {}
    outs = {s.name: [f"out_{s.name}_{k}".replace("@", "_") for k in range(counts.get(s.name, 1))]
            for s in g.schema.outputs}
    op = block.append_op(g.schema.type, ins, outs, attrs or {})
    return Built(main, op, feed)


# -- unary ------------------------------------------------------------------------------------------------------
def _unary(g: Draw) -> Built:
    op, dtype = g.schema.type, g.dtype("X")
    attrs: dict[str, Any] = {}
    if op == "scale":
        whole = dtype in INT_DTYPES
        attrs = {"scale": g.int(-3, 3) if whole else g(st.sampled_from([-1.5, 0.0, 2.0])),
                 "bias": g.int(-3, 3) if whole else g(st.sampled_from([0.0, 0.5]))}
    elif op == "clip":
        lo = g(st.sampled_from([float("-inf"), -1.0, 0.0]))
        attrs = {"min": lo, "max": lo + g(st.sampled_from([0.0, 1.5, float("inf")]))}
    elif op == "leaky_relu":
        attrs = {"alpha": 0.1}
    elif op == "pow":
        attrs = {"factor": g(st.sampled_from([0.0, 0.5, 2.0, 3.0, -1.0]))}
    return one_op(g, {"X": g.array(g.shape(), dtype)}, attrs)


def _from_output(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("Out")
    return one_op(g, {"Out": g.array(shape, dtype, -1, 1), "Out@GRAD": g.array(shape, dtype)})


def _like_x(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("X")
    attrs = {"clip_grad": {"min": -1.0, "max": 1.0}, "leaky_relu_grad": {"alpha": 0.2},
             "elu_grad": {"alpha": 0.5}}.get(g.schema.type, {})
    return one_op(g, {"X": g.array(shape, dtype), "Out@GRAD": g.array(shape, dtype)}, attrs)


# -- binary -----------------------------------------------------------------------------------------------------
def _binary(g: Draw) -> Built:
    (xs, ys), dtype = g.broadcast_pair(), g.dtype("X")
    low = 0 if g.schema.type == "elementwise_pow" and dtype in INT_DTYPES else -3  # no negative int powers
    return one_op(g, {"X": g.array(xs, dtype), "Y": g.array(ys, dtype, low, 3)})


def _where(g: Draw) -> Built:
    (xs, ys), dtype = g.broadcast_pair(), g.dtype("X")
    cs = xs if g.flag() else ys
    return one_op(g, {"Condition": g.array(cs, g.dtype("Condition")), "X": g.array(xs, dtype),
                      "Y": g.array(ys, dtype)})


def _matmul(g: Draw) -> Built:
    dtype = g.dtype("X")
    bx, by = g.broadcast_pair(max_rank=2) if g.flag() else ([], [])
    m, k, n = g.int(0, 3), g.int(0, 3), g.int(0, 3)
    tx, ty = g.flag(), g.flag()
    x = g.array(bx + ([k, m] if tx else [m, k]), dtype)
    y = g.array(by + ([n, k] if ty else [k, n]), dtype)
    return one_op(g, {"X": x, "Y": y}, {"transpose_x": tx, "transpose_y": ty})


# -- reductions -------------------------------------------------------------------------------------------------
def _reduce_attrs(g: Draw, rank: int) -> dict:
    dim = g(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank)) if rank else []
    return {"dim": dim, "keep_dim": g.flag(), "reduce_all": g.flag() and g.flag()}


def _reduce(g: Draw) -> Built:
    shape = g.shape()
    attrs = _reduce_attrs(g, len(shape))
    if g.schema.type in ("reduce_max", "reduce_min"):  # an empty axis has no max: every reduced axis is >= 1
        axes = range(len(shape)) if attrs["reduce_all"] or not attrs["dim"] else [a % len(shape) for a in attrs["dim"]]
        shape = [max(d, 1) if i in axes else d for i, d in enumerate(shape)]
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, attrs)


def _mean(g: Draw) -> Built:
    return one_op(g, {"X": g.array(g.shape(), g.dtype("X"))})


def _mean_grad(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("X")
    attrs = _reduce_attrs(g, len(shape))
    out = reduced_shape(shape, attrs["dim"], attrs["keep_dim"], attrs["reduce_all"])
    return one_op(g, {"X": g.array(shape, dtype), "Out@GRAD": g.array(out, dtype)}, attrs)


def _prod_others(g: Draw) -> Built:
    shape = g.shape()
    attrs = _reduce_attrs(g, len(shape))
    del attrs["keep_dim"]
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, attrs)


def _argmax(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    axis = g.int(-len(shape), len(shape) - 1)
    shape[axis] = max(shape[axis], 1)  # no index of the largest of nothing
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axis": axis, "keep_dim": g.flag()})


# -- creation ---------------------------------------------------------------------------------------------------
def _value_for(g: Draw, dtype: str):
    if dtype == "bool":
        return g.int(0, 1)
    if dtype == "int64":
        return g(st.sampled_from([-(2 ** 63), 2 ** 53 + 1, 7, 2 ** 63 - 1]))
    if dtype == "int32":
        return g(st.sampled_from([-(2 ** 31), 0, 2 ** 31 - 1]))
    return g(st.sampled_from([0.0, -2.5, 1e4, float("inf")]))


def _fill_constant(g: Draw) -> Built:
    dtype = g.dtype("dtype")
    return one_op(g, {}, {"shape": g.shape(), "dtype": dtype, "value": _value_for(g, dtype)})


def _random(g: Draw) -> Built:
    return one_op(g, {}, {"shape": g.shape(), "dtype": g.dtype("dtype"), "seed": g.int(0, 9)})


def _filled_like(g: Draw) -> Built:
    x = g.array(g.shape(), g.dtype("X"))
    dtype = g.dtype("dtype", DTYPES + ("",))
    attrs = {"dtype": dtype}
    if g.schema.type == "fill_any_like":
        attrs["value"] = _value_for(g, dtype or x.dtype.name)
    return one_op(g, {"X": x}, attrs)


def _assign(g: Draw) -> Built:
    return one_op(g, {"X": g.array(g.shape(), g.dtype("X"))})


def _cast(g: Draw) -> Built:
    return one_op(g, {"X": g.array(g.shape(), g.dtype("X"))}, {"out_dtype": g.dtype("out_dtype")})


# -- manipulation -----------------------------------------------------------------------------------------------
def _same_arrays(g: Draw, shape=None) -> list[np.ndarray]:
    shape, dtype = g.shape() if shape is None else shape, g.dtype("X")
    return [g.array(shape, dtype) for _ in range(g.int(1, 3))]


def _sum(g: Draw) -> Built:
    xs = _same_arrays(g)
    return one_op(g, {"X": xs}, known=("X",) if len(xs) > 1 else ())


def _reduce_as(g: Draw) -> Built:
    shape = g.shape()
    target = [1 if g.flag() else d for d in shape[g.int(0, len(shape)):]]
    return one_op(g, {"X": g.array(shape, g.dtype("X")), "Target": g.array(target, g.dtype("Target"))},
                  known=("X", "Target"))


def _broadcast_to(g: Draw) -> Built:
    small, big = g.broadcast_pair()
    if len(small) > len(big) or any(s not in (1, b) for s, b in zip(small[::-1], big[::-1])):
        small, big = big, small
    x = g.array(small, g.dtype("X"))
    if "ShapeLike" in g.want or g.flag():
        return one_op(g, {"X": x, "ShapeLike": g.array(big, g.dtype("ShapeLike"))}, known=("X", "ShapeLike"))
    return one_op(g, {"X": x}, {"shape": big}, known=("X",))


def _reshape(g: Draw) -> Built:
    shape = g.shape()
    size = int(np.prod(shape))
    sizes = [shape[::-1], shape + [1]] + ([[size]] if size else [])  # a 0 in `shape` copies X's dim: no empty sizes
    target = g(st.sampled_from([[-1], [1, -1], [0] * len(shape)] + [s for s in sizes if 0 not in s]))
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"shape": target})


def _transpose(g: Draw) -> Built:
    shape = g.shape()
    perm = g(st.permutations(range(len(shape))))
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"perm": list(perm)})


def _concat(g: Draw) -> Built:
    shape, dtype = g.shape(min_rank=1), g.dtype("X")
    axis = g.int(-len(shape), len(shape) - 1)
    xs = []
    for _ in range(g.int(1, 3)):
        piece = list(shape)
        piece[axis] = g.int(0, 3)
        xs.append(g.array(piece, dtype))
    return one_op(g, {"X": xs}, {"axis": axis}, known=("X",))


def _sections(g: Draw, size: int) -> list[int]:
    cuts = sorted(g(st.lists(st.integers(0, size), max_size=3)))
    sections = [b - a for a, b in zip([0] + cuts, cuts + [size])]
    if g.flag():
        sections[g.int(0, len(sections) - 1)] = -1
    return sections


def _split(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    axis = g.int(-len(shape), len(shape) - 1)
    sections = _sections(g, shape[axis])
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axis": axis, "sections": sections},
                  {"Out": len(sections)}, known=("X",))


def _slice_attrs(g: Draw, rank: int) -> dict:
    axes = g(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank)) if rank else []
    return {"axes": axes, "starts": [g.int(-4, 4) for _ in axes], "ends": [g.int(-4, 4) for _ in axes]}


def _slice(g: Draw) -> Built:
    shape = g.shape()
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, _slice_attrs(g, len(shape)))


def _slice_grad(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("X")
    attrs = _slice_attrs(g, len(shape))
    index = [slice(None)] * len(shape)
    for a, s, e in zip(attrs["axes"], attrs["starts"], attrs["ends"]):
        index[a] = slice(s, e)
    out = np.zeros(shape)[tuple(index)].shape
    return one_op(g, {"X": g.array(shape, dtype), "Out@GRAD": g.array(out, dtype)}, attrs)


def _pad(g: Draw) -> Built:
    shape, dtype = g.shape(), g.dtype("X")
    value = g.int(-2, 2) if dtype in INT_DTYPES else g(st.sampled_from([0.0, -1.5, float("inf")]))
    return one_op(g, {"X": g.array(shape, dtype)}, {"paddings": [g.int(0, 2) for _ in range(2 * len(shape))],
                                                    "pad_value": value})


def _cumsum(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    return one_op(g, {"X": g.array(shape, g.dtype("X"))},
                  {"axis": g.int(-len(shape), len(shape) - 1), "exclusive": g.flag(), "reverse": g.flag()})


def _squeeze(g: Draw) -> Built:
    shape = g.shape(max_side=2)
    ones = [i for i, d in enumerate(shape) if d == 1]
    axes = g(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axes": axes}, known=() if axes else ("X",))


def _unsqueeze(g: Draw) -> Built:
    shape = g.shape(max_rank=3)
    axes = [g.int(-(len(shape) + k + 1), len(shape) + k) for k in range(g.int(1, 2))]
    return one_op(g, {"X": g.array(shape, g.dtype("X"))}, {"axes": axes})


def _stack(g: Draw) -> Built:
    xs = _same_arrays(g, g.shape(max_rank=3))
    return one_op(g, {"X": xs}, {"axis": g.int(-xs[0].ndim - 1, xs[0].ndim)}, known=("X",))


def _gather_parts(g: Draw):
    shape = g.shape(min_rank=1)
    axis = g.int(-len(shape), len(shape) - 1)
    shape[axis] = max(shape[axis], 1)
    index = g.array(g.shape(max_rank=2), g.dtype("Index"), 0, shape[axis] - 1)
    return shape, axis, index


def _by_index(parts: Callable, out_shape: Callable) -> Callable[[Draw], Built]:
    """A builder of an op over X at an Index along `axis` (``parts`` draws them); a grad op also gets an
    Out@GRAD shaped like the forward op's Out, ``out_shape(shape, axis, index)``."""

    def build(g: Draw) -> Built:
        shape, axis, index = parts(g)
        ins = {"X": g.array(shape, g.dtype("X")), "Index": index}
        if "Out@GRAD" in g.schema.tables.inputs:
            ins["Out@GRAD"] = g.array(out_shape(shape, axis, index), ins["X"].dtype.name)
        return one_op(g, ins, {"axis": axis})

    return build


_gather = _gather_grad = _by_index(
    _gather_parts, lambda shape, axis, index: np.take(np.zeros(shape), np.zeros(index.shape, int), axis=axis).shape)


def _reshape_as(g: Draw) -> Built:
    shape = g.shape()
    target = g(st.sampled_from([shape[::-1], shape + [1], [int(np.prod(shape))]]))
    return one_op(g, {"X": g.array(shape, g.dtype("X")), "Target": g.array(target, g.dtype("Target"))},
                  known=("Target",))


def _split_like(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    axis = g.int(-len(shape), len(shape) - 1)
    sections = [s if s != -1 else 0 for s in _sections(g, shape[axis])]
    sections[-1] += shape[axis] - sum(sections)
    likes = []
    for s in sections:
        piece = list(shape)
        piece[axis] = s
        likes.append(g.array(piece, g.dtype("Like")))
    return one_op(g, {"X": g.array(shape, g.dtype("X")), "Like": likes}, {"axis": axis}, {"Out": len(likes)},
                  known=("Like",))


# -- indexing ---------------------------------------------------------------------------------------------------
def _axis_of(g: Draw, shape: list[int]) -> int:
    return g.int(-len(shape), len(shape) - 1)


def _scatter(g: Draw) -> Built:
    shape, dtype = g.shape(min_rank=1), g.dtype("X")
    axis = _axis_of(g, shape)
    size = shape[axis]
    if g.schema.type == "scatter":  # each position at most once: which of two updates wins is undefined
        picked = g(st.lists(st.integers(0, size - 1), unique=True, max_size=size)) if size else []
        index = np.array([p - size if g.flag() else p for p in picked], dtype=g.dtype("Index"))
    else:
        index = g.array(g.shape(max_rank=2), g.dtype("Index"), -size, size - 1) if size else \
            np.zeros([0], g.dtype("Index"))
    updates = shape[:axis % len(shape)] + list(index.shape) + shape[axis % len(shape) + 1:]
    return one_op(g, {"X": g.array(shape, dtype), "Index": index, "Updates": g.array(updates, dtype)},
                  {"axis": axis})


def _along_axis_parts(g: Draw):
    shape = g.shape(min_rank=1)
    axis = _axis_of(g, shape)
    ishape = list(shape)
    ishape[axis] = g.int(0, 3) if shape[axis] else 0  # positions of an empty axis: none
    return shape, axis, g.array(ishape, g.dtype("Index"), 0, shape[axis] - 1)


_take_along_axis = _take_along_axis_grad = _by_index(_along_axis_parts, lambda shape, axis, index: index.shape)


def _top_k(g: Draw) -> Built:
    shape = g.shape(min_rank=1)
    axis = _axis_of(g, shape)
    return one_op(g, {"X": g.array(shape, g.dtype("X"))},
                  {"k": g.int(0, shape[axis]), "axis": axis, "largest": g.flag()}, known=("X",))


# -- logic, nn, network -----------------------------------------------------------------------------------------
