"""Lowerings of the collective ops: the all-reduce and the broadcast as ordered host callbacks into the
process's communicator (``runtime/communicator.py``), so a data-parallel step compiles whole and its ranks
stay in step: every rank runs the same program, whose ordered callbacks reach MPI in the same order.

The numpy backend overlaps a bucket's all-reduce with the rest of the backward pass (``allreduce_start``
starts it, ``allreduce_wait`` waits); here the sum is made, blocking, at ``allreduce_start``, and
``allreduce_wait`` only averages and splits it: the same values, without the overlap.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import io_callback

from ....runtime.communicator import communicator

__all__ = ["LOWERINGS"]


def _on_host(fn, x):
    """``fn(array) -> array of x's shape and dtype``, called on the host in order with the other collectives.

    A callback runs on a thread where jax's 64-bit mode is off and would narrow a float64 or int64 argument to
    32 bits: 8-byte values cross as pairs of uint32 (``bitcast_convert_type``) and are viewed back on the host,
    bit for bit."""
    dtype = np.dtype(x.dtype)
    if dtype.itemsize != 8:
        return io_callback(fn, jax.ShapeDtypeStruct(x.shape, dtype), x, ordered=True)

    def host(words):
        value = fn(np.ascontiguousarray(words).view(dtype).reshape(x.shape))
        return np.ascontiguousarray(value, dtype).view(np.uint32).reshape(x.shape + (2,))

    words = lax.bitcast_convert_type(x, jnp.uint32)
    back = io_callback(host, jax.ShapeDtypeStruct(words.shape, np.uint32), words, ordered=True)
    return lax.bitcast_convert_type(back, dtype)


def _summed(flat: np.ndarray) -> np.ndarray:
    """The sum over every rank of ``flat`` (this rank's), made on the host."""
    comm = communicator()
    if comm.size == 1:
        return flat
    recv = np.zeros_like(flat)
    comm.wait(comm.start_sum(np.ascontiguousarray(flat), recv))
    return recv


def _allreduce_start(op, ctx):
    def run(*xs):
        return _on_host(_summed, jnp.concatenate([jnp.ravel(x) for x in xs]))

    return run


def _allreduce_wait(op, ctx):
    average = op.attr("average")
    shapes = [tuple(x.shape) for x in map(op.block.var, op.input("X"))]

    def run(flat, *xs):
        size = io_callback(lambda: np.asarray(communicator().size, np.int32), jax.ShapeDtypeStruct((), np.int32),
                           ordered=True)
        if average:
            flat = jnp.where(size > 1, flat / size.astype(flat.dtype), flat)
        out, at = [], 0
        for x, shape in zip(xs, shapes):
            n = math.prod(x.shape)
            out.append(flat[at:at + n].reshape(x.shape))
            at += n
        return out[0] if len(out) == 1 else tuple(out)

    return run


def _broadcast(op, ctx):
    root = op.attr("root")

    def run(*xs):
        out = tuple(_on_host(lambda v: communicator().broadcast(np.array(v), root), x) for x in xs)
        return out[0] if len(out) == 1 else out

    return run


LOWERINGS = {"allreduce_start": _allreduce_start, "allreduce_wait": _allreduce_wait, "broadcast": _broadcast}
