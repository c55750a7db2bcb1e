"""The array namespace the xla engine hands to an op's ``compute`` (``OpSchema.compute``): ``jax.numpy``'s
functions, plus ``erf`` (``jax.scipy.special.erf``), with ``log``, ``exp`` and ``astype`` kept from XLA's algebraic
rewrites.

XLA's algebraic simplifier rewrites ``log(exp(a))`` to ``a``, ``log(pow(a, b))`` to ``b * log(|a|)``,
``exp(a) * exp(b)`` to ``exp(a + b)`` and ``a * convert(mask)`` to ``select(mask, a, 0)``, with no flag to turn
that off: right in real numbers, wrong in IEEE arithmetic (``log(exp(800.0))`` is inf, ``log(pow(-2.0, 0.5))`` is
NaN, not 0.35, ``inf * 0.0`` is NaN, not 0). ``log``'s input, ``exp``'s output and a boolean's conversion to a
float pass through ``as_computed``: a reduce-precision to the value's own format, which changes no bit, stays
inside its fusion (no measurable cost), and is an op those rewrites do not match (``design_docs/numerics.md``).
"""
from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
from jax import lax
from jax.scipy.special import erf

__all__ = ["XP", "as_computed"]


def as_computed(x):
    """``x`` unchanged, in a form XLA's algebraic rewrites cannot see through (floats; other dtypes as they are)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    info = jnp.finfo(x.dtype)
    return lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)


def _log(x):
    return jnp.log(as_computed(jnp.asarray(x)))


def _exp(x):
    return as_computed(jnp.exp(x))


def _astype(x, dtype, /, *, copy: bool = True):
    """jax.numpy's astype; a boolean made a float is ``as_computed``, so a product with it stays a product."""
    out = jnp.astype(x, dtype, copy=copy)
    if jnp.asarray(x).dtype == jnp.bool_ and jnp.issubdtype(out.dtype, jnp.floating):
        return as_computed(out)
    return out


def _einsum(equation: str, *operands):
    """jax.numpy's einsum in full precision (``Precision.HIGHEST``: no TF32 or bfloat16 passes on an accelerator)."""
    return jnp.einsum(equation, *operands, precision=lax.Precision.HIGHEST)


XP = SimpleNamespace(**{**{name: getattr(jnp, name) for name in dir(jnp) if not name.startswith("_")},
                        "erf": erf, "log": _log, "exp": _exp, "astype": _astype,
                        "einsum": _einsum})
"""jax.numpy as ``xp``."""
