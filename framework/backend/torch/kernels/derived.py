"""Kernels derived from the ops' own math (``backend/derive``): ``compute`` run with ``xp`` = torch (``xp.XP``) and the
engine's primitives (``kernels.XP``).

torch promotes otherwise than numpy (int32 / int32 is float32 in torch, float64 in numpy), so, as the xla engine does,
an op with one non-bool output and all its inputs given computes in the dtype it declares: each input of another dtype
is cast to it first (a bool input, a condition or a mask, stays bool; a float input of an op that declares an integer,
an index such as argmax's, stays float: cast, NaN and inf became integers; an input of a slot that takes integers
only, ids, or of an op that takes its inputs as given, stays as it is: ``derive.uncast_inputs``), and the result is
cast to it. A bool result (a comparison) compares its inputs as they are; an op with several outputs or optional slots
(layer norm) states its working dtype in its ``compute``.

An op whose schema names one ATen call (``OpSchema.aten``; ``program.ops.activation.ATEN``; an optimizer update's few
passes in ``program.ops.optimizer``) runs that call where every output and input is of the op's dtype, float32
or float64, no input is empty, every input is finite (``finite``; not asked where the schema says the call meets
special values as the compute does, ``aten_any_values``), and the call does not decline them (None), and its
``compute`` elsewhere: ATen's fused kernels part from the reference on NaN and infinities in places, and some at
the ends of the float range. The call takes the inputs in the compute's places (None for an optional one not
given) and its results are picked as the compute's are; its ATen operators keep what a gradient kernel needs again
(``kept.ATEN``: layer norm's row statistics). A result the schema says is finite (``aten_finite_out``:
its first output, for the inputs the call takes) is known finite to the next kernel (``finite.known_finite``), and
so are the inputs of a call that meets any values (``aten_any_values``) and gives one: it declined them otherwise.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import torch

from gradgen.program.schema import OpSchema

from ...derive import call_of, uncast_inputs
from ..xp import torch_dtype
from . import kept
from .finite import FUSED, all_finite, known_finite, remembered

__all__ = ["computed_kernel", "derived_kernel"]

_ATEN = kept.ATEN
"""ATen's operators, ``native_layer_norm`` keeping what its gradient needs again (``kept``)."""


def _as(value, dtype: torch.dtype) -> torch.Tensor:
    value = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    return value if value.dtype == dtype else value.to(dtype)


def derived_kernel(schema: OpSchema, xp: SimpleNamespace) -> Callable:
    """The kernel factory of an op with a ``compute``, run over ``xp``; of its ``aten`` call where it has one and
    the values allow (module docstring)."""
    factory = _aten_kernel(schema, xp) if schema.aten is not None else computed_kernel(schema, xp)
    if schema.finite_from_finite or schema.finite_out_proves:
        return _knowing_finite(factory, schema.finite_from_finite, schema.finite_out_proves)
    return factory


PROOF_RATIO = 8
"""A kernel's output is summed to prove its inputs finite (``OpSchema.finite_out_proves``) only where those inputs
not yet known finite have this many times its elements or more: the sum of a [256] bias gradient (a few us) to
spare a later one of the [16, 128, 256] gradient it came from; where no later kernel reads them, the small sum is
what it costs."""


def _knowing_finite(factory: Callable, keeps: bool, proves: tuple[str, ...]) -> Callable:
    """``factory``'s kernels, telling the run what they learn of finiteness without a sum of their own inputs:
    with ``keeps`` (``OpSchema.finite_from_finite``) the output is known finite where every input is known so
    already; the inputs in the slots ``proves`` (``OpSchema.finite_out_proves``) are known finite where the output
    is found finite (one sum of the output, where it is small beside them: ``PROOF_RATIO``)."""
    def knowing_factory(op) -> Callable:
        run = factory(op)
        places = [at for at, slot in enumerate(s for s, names in op.inputs.items() for _ in names) if slot in proves]

        def knowing_run(*xs):
            out = run(*xs)
            if keeps and all(remembered(x) for x in xs):
                known_finite(out)
            unknown = [xs[at] for at in places if not remembered(xs[at])]
            if unknown and out.numel() * PROOF_RATIO <= sum(x.numel() for x in unknown) and all_finite(out):
                for x in unknown:
                    known_finite(x)
            return out
        return knowing_run

    return knowing_factory


def _aten_kernel(schema: OpSchema, xp: SimpleNamespace) -> Callable:
    """The kernel factory of an op with an ``aten`` call: that call where the dtypes and the values allow, its
    ``compute`` elsewhere."""
    computed = computed_kernel(schema, xp)
    call = schema.aten

    def factory(op) -> Callable:
        attrs, dtypes, args, pick = call_of(schema, op)
        run_compute, dtype = computed(op), torch_dtype(dtypes[0])
        if dtype not in FUSED or any(torch_dtype(d) != dtype for d in dtypes):  # float16: the compute's rounding
            return run_compute
        any_values, finite_out = schema.aten_any_values, schema.aten_finite_out
        if any(torch_dtype(op.block.var(name).dtype) != dtype for name in op.input_arg_names):
            return run_compute  # (an input of another dtype: the inputs arrive in their declared dtypes)

        def run(*xs):
            if all(x.numel() for x in xs) and (any_values or all_finite(*xs)):
                result = call(_ATEN, *(xs if args is None else args(xs)), **attrs)
                if result is not None:
                    if finite_out:
                        known_finite(result[0] if isinstance(result, tuple) else result)
                        if any_values:  # such a call declines any input that is not finite (``OpSchema``)
                            for x in xs:
                                known_finite(x)
                    return result if pick is None else pick(result)
            return run_compute(*xs)
        return run

    return factory


def computed_kernel(schema: OpSchema, xp: SimpleNamespace) -> Callable:
    """The kernel factory running ``schema.compute`` over ``xp``."""
    compute = schema.compute

    def factory(op) -> Callable:
        attrs, np_dtypes, args, pick = call_of(schema, op)
        dtypes = [torch_dtype(d) for d in np_dtypes]
        if len(dtypes) > 1 or args is not None or pick is not None:
            def run(*xs):
                result = compute(xp, *(xs if args is None else args(xs)), **attrs)
                result = result if pick is None else pick(result)
                return _as(result, dtypes[0]) if len(dtypes) == 1 else tuple(map(_as, result, dtypes))
            return run
        (dtype,) = dtypes
        if dtype == torch.bool:
            return lambda *xs: _as(compute(xp, *xs, **attrs), dtype)
        kept, uncast = (dtype, torch.bool), uncast_inputs(schema, op)
        floats_kept = not dtype.is_floating_point  # an index of float values (argmax) reads them as they are

        def read_as_given(k: int, given: torch.dtype) -> bool:
            return given in kept or (floats_kept and given.is_floating_point) or k in uncast

        declared = [torch_dtype(op.block.var(name).dtype) for name in op.input_arg_names]
        if all(read_as_given(k, d) for k, d in enumerate(declared)):
            # Every input arrives in its declared dtype (the runner checks the feeds and the scope's values, the
            # walk every output), so none is cast: decided here, not per call (a LeNet step runs 70 such kernels).
            return lambda *xs: _as(compute(xp, *xs, **attrs), dtype)
        return lambda *xs: _as(compute(xp, *(x if read_as_given(k, x.dtype) else x.to(dtype)
                                             for k, x in enumerate(xs)), **attrs), dtype)

    return factory
