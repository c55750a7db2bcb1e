"""Layers that declare inputs and parameters or make constant tensors."""
from __future__ import annotations

from numbers import Integral, Number
from typing import Sequence

from ..dtypes import INT_DTYPES, normalize_dtype
from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..initializer import XavierUniform
from ..variable import Variable
from .helper import append, append_into, check_var
from .naming import named


def data(name: str, shape: Sequence[int | None], dtype="float32") -> Variable:
    """Declare an input fed at run time (-1 or None for sizes known only then). Data gets no gradient by default."""
    block = default_main_program().current_block()
    if isinstance(shape, (list, tuple)):
        shape = [-1 if d is None else d for d in shape]
    return block.create_var(name, shape, dtype, stop_gradient=True)


def create_parameter(shape: Sequence[int], dtype="float32", name: str | None = None, initializer=None,
                     trainable: bool = True) -> Variable:
    """A persistable, trainable var in the main program, initialized by an op in the startup program.

    The default initializer is Xavier-uniform with a seed drawn from the
    startup program's deterministic seed sequence.
    """
    if any(int(d) < 0 for d in shape):
        raise ProgramError(f"parameter {name or ''} needs a fully known shape, got {list(shape)}")
    dtype = normalize_dtype(dtype)
    main, startup = default_main_program(), default_startup_program()
    name = name or main.unique_name("param")
    var = main.global_block().create_var(name, shape, dtype, persistable=True, is_parameter=True, trainable=trainable,
                                         stop_gradient=not trainable)
    init = initializer if initializer is not None else XavierUniform()
    op_type, attrs = init.op(tuple(shape), dtype, startup.next_seed())
    sblock = startup.global_block()
    if name not in sblock.vars:
        sblock.create_var(name, shape, dtype, persistable=True, is_parameter=True, trainable=trainable)
    sblock.append_op(op_type, {}, {"Out": [name]}, attrs)
    return var


@named
def fill_constant(shape: Sequence[int], dtype, value: int | float, name: str | None = None) -> Variable:
    """A tensor of ``shape`` filled with ``value``, which ``dtype`` must hold exactly (an int stays exact)."""
    return append("fill_constant", {}, {"shape": list(shape), "dtype": normalize_dtype(dtype), "value": value},
                  name=name, stop_gradient=True)


@named
def uniform_random(shape: Sequence[int], dtype="float32", min: float = -1.0, max: float = 1.0, seed: int = 0,
                   name: str | None = None, redraw: bool = False) -> Variable:
    """Uniform samples in [min, max) (Paddle's ``layers.uniform_random``). ``seed=0`` takes the program's next
    seed (``Program.next_seed``), so programs built alike sample alike. Each run of the op gives the same
    samples, or with ``redraw=True`` new ones from a stream the seed starts (noise that changes every step, as
    Paddle's ``seed=0`` gives)."""
    return _random("uniform_random", shape, dtype, {"min": float(min), "max": float(max)}, seed, name, redraw)


@named
def gaussian_random(shape: Sequence[int], mean: float = 0.0, std: float = 1.0, seed: int = 0, dtype="float32",
                    name: str | None = None, redraw: bool = False) -> Variable:
    """Normal samples (Paddle's ``layers.gaussian_random``, same argument order); ``seed`` and ``redraw`` as
    ``uniform_random``'s."""
    return _random("gaussian_random", shape, dtype, {"mean": float(mean), "std": float(std)}, seed, name, redraw)


def _random(op_type: str, shape: Sequence[int], dtype, attrs: dict, seed: int, name: str | None,
            redraw: bool) -> Variable:
    if any(int(d) < 0 for d in shape):
        raise ProgramError(f"{op_type} needs a fully known shape, got {list(shape)}")
    seed = int(seed) or default_main_program().next_seed()
    return append(op_type, {}, {"shape": [int(d) for d in shape], "dtype": normalize_dtype(dtype), **attrs,
                                "seed": seed, "redraw": bool(redraw)}, name=name, stop_gradient=True)


def as_var(value, like: Variable | None = None, dtype: str | None = None) -> Variable:
    """A Variable for ``value``: itself if it is one, else a ``fill_constant`` scalar of ``like``'s dtype."""
    if isinstance(value, Variable):
        return value
    return fill_constant([], dtype or (like.dtype if like is not None else "float32"), value)


PROMOTED_FLOAT = "float64"
"""The dtype an integer var becomes beside a float number: numpy's choice, and exact for ints up to 2**53."""


def with_number(x: Variable, c, promote: bool = False) -> tuple[Variable, object]:
    """``x`` and Python number ``c`` brought to one dtype (design_docs/ir.md, "dtype rules").

    An int var keeps an int number exact (its dtype must hold it); a float
    number, or ``promote`` (true division, a negative power), casts an int var
    to float64; a float var takes any number as a float. Anything but a
    number is returned as it is.
    """
    if not isinstance(c, Number):
        return x, c
    if x.dtype in INT_DTYPES and isinstance(c, Integral) and not promote:
        return x, int(c)
    try:
        number = float(c)
    except OverflowError:
        shown = repr(c) if len(repr(c)) <= 24 else f"{repr(c)[:12]}... ({len(repr(c))} digits)"
        raise ProgramError(f"the number {shown} beside var '{x.name}' ({x.dtype}) is too large for any float "
                           "dtype") from None
    return (cast(x, PROMOTED_FLOAT) if x.dtype in INT_DTYPES else x), number


def as_operands(x, y) -> tuple[Variable, Variable]:
    """The operands of a binary layer as Variables of one dtype: a number beside a var becomes a constant of
    that var's dtype, after ``with_number`` promoted the var if the number asks for it."""
    if isinstance(x, Variable) and not isinstance(y, Variable):
        x, y = with_number(x, y)
    elif isinstance(y, Variable) and not isinstance(x, Variable):
        y, x = with_number(y, x)
    x = as_var(x, like=y if isinstance(y, Variable) else None)
    return x, as_var(y, like=x)


def zeros_like(x: Variable, dtype=None) -> Variable:
    return append("fill_zeros_like", {"X": check_var(x, "x")}, {"dtype": normalize_dtype(dtype) if dtype else ""},
                  stop_gradient=True)


def ones_like(x: Variable, dtype=None) -> Variable:
    return append("fill_any_like", {"X": check_var(x, "x")},
                  {"value": 1.0, "dtype": normalize_dtype(dtype) if dtype else ""}, stop_gradient=True)


def assign(x: Variable, output: Variable | None = None) -> Variable:
    """Out = x; writes into ``output`` when given."""
    if output is not None:
        return append_into("assign", {"X": check_var(x, "x")}, output)
    return append("assign", {"X": check_var(x, "x")})


def cast(x: Variable, dtype) -> Variable:
    return append("cast", {"X": check_var(x, "x")}, {"out_dtype": normalize_dtype(dtype)})


__all__ = ["data", "create_parameter", "fill_constant", "uniform_random", "gaussian_random", "as_var", "PROMOTED_FLOAT", "with_number", "as_operands",
           "zeros_like", "ones_like", "assign", "cast"]
