"""A call's signature: which arguments are fed arrays (name, dtype, declared shape) and which are static values.

``gradgen.framework.function`` builds one program per signature. An array argument becomes a ``layers.data`` var named
after its parameter; its first dim is declared -1 (any batch size), the others exactly, so a new batch size
reuses the program and a new dtype, rank or feature size builds another. Any other argument is static: a
hashable Python value (int, float, str, None, a tuple of them) handed to the function as it is, and part of
the key, the way ``jax.jit``'s ``static_argnames`` are.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from gradgen.program.dtypes import DTYPES
from gradgen.program.shapes import format_shape

from ..errors import FunctionError

__all__ = ["Input", "Signature", "bind", "leaves", "signature_of", "substituted", "changes"]


class Input(NamedTuple):
    """An array argument as its program declares it."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{format_shape(self.shape)}"


class Signature(NamedTuple):
    """What one program is built for: the array inputs, then the static arguments as (name, type, value)."""

    inputs: tuple[Input, ...]
    static: tuple[tuple[str, type, Any], ...]

    def __str__(self) -> str:
        return ", ".join([str(i) for i in self.inputs] + [f"{name}={value!r}" for name, _, value in self.static])


def bind(fn: Callable, args: tuple, kwargs: dict, where: str) -> inspect.BoundArguments:
    """``args`` and ``kwargs`` bound to ``fn``'s parameters, defaults filled in. ``where`` names ``fn`` in errors."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise FunctionError(f"{where}: {e}") from None
    bound.apply_defaults()
    return bound


def leaves(bound: inspect.BoundArguments) -> Iterator[tuple[str, Any]]:
    """(name, value) of every argument: ``*args`` items as ``args_0, args_1, ...``, ``**kwargs`` by their keys."""
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            yield from ((f"{name}_{i}", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            yield from value.items()
        else:
            yield name, value


def substituted(bound: inspect.BoundArguments, values: dict[str, Any]) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of the call with each argument named in ``values`` replaced by its value there."""
    arguments = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            arguments[name] = tuple(values.get(f"{name}_{i}", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            arguments[name] = {key: values.get(key, v) for key, v in value.items()}
        else:
            arguments[name] = values.get(name, value)
    replaced = inspect.BoundArguments(bound.signature, arguments)
    return replaced.args, replaced.kwargs


def is_array(value: Any) -> bool:
    """Whether an argument is fed to the program: a numpy array or scalar, or anything with ``__array__``."""
    return isinstance(value, (np.ndarray, np.generic)) or (hasattr(value, "__array__") and not isinstance(value, type))


def _input(where: str, name: str, value: Any, exact_shapes: bool) -> Input:
    array = np.asarray(value)
    if array.dtype.name not in DTYPES:
        raise FunctionError(f"{where}: argument '{name}' is a {array.dtype.name} array; a program takes "
                            f"{', '.join(DTYPES)}: convert it first (e.g. {name}.astype('float32'))")
    shape = tuple(int(d) for d in array.shape)
    if shape and not exact_shapes:
        shape = (-1,) + shape[1:]
    return Input(name, array.dtype.name, shape)


def _static(where: str, name: str, value: Any) -> tuple[str, type, Any]:
    try:
        hash(value)
    except TypeError:
        raise FunctionError(f"{where}: argument '{name}' is a {type(value).__name__}, neither an array (fed to the "
                            f"program) nor a hashable Python value (a static argument, part of the cache key); pass "
                            f"a numpy array, or a tuple instead of a list") from None
    return name, type(value), value


def signature_of(where: str, bound: inspect.BoundArguments, exact_shapes: bool = False) -> tuple[Signature, dict]:
    """The call's ``Signature`` and its feed (array arguments by name). ``where`` names the function in errors."""
    inputs, static, feed = [], [], {}
    for name, value in leaves(bound):
        if is_array(value):
            inputs.append(_input(where, name, value, exact_shapes))
            feed[name] = np.asarray(value)
        else:
            static.append(_static(where, name, value))
    return Signature(tuple(inputs), tuple(static)), feed


def _described(signature: Signature) -> dict[str, str]:
    """Argument name -> its type (an input) or its repr (a static value)."""
    return ({i.name: f"{i.dtype}{format_shape(i.shape)}" for i in signature.inputs}
            | {name: repr(value) for name, _, value in signature.static})


def changes(old: Signature, new: Signature) -> list[str]:
    """What differs between two signatures, one phrase per argument: ``x: float32[-1, 4] -> float64[-1, 4]``."""
    before, after = _described(old), _described(new)
    return [f"{name}: {before.get(name, 'absent')} -> {after.get(name, 'absent')}"
            for name in dict.fromkeys([*before, *after]) if before.get(name) != after.get(name)]
