"""Kernels of the collective ops in ``program/ops/collective.py``, over the process's communicator.

A started sum lives on between two kernels: ``allreduce_start`` returns the
receive buffer MPI is still filling and files the request under that
buffer's identity; ``allreduce_wait`` gets the same array as its input,
takes the request back and waits on it. Both ask ``communicator()`` at run
time, so ``init_parallel`` may come after a plan was built.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import DistributedError
from ....runtime.communicator import Done, communicator

_in_flight: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}
"""id(receive buffer) -> (request, send buffer, receive buffer): both buffers stay alive until the wait."""


def allreduce_start(op):
    def run(*xs):
        comm = communicator()
        send = np.concatenate([np.ravel(x) for x in xs])
        if comm.size == 1:  # a world of one: the sum is the buffer itself
            _in_flight[id(send)] = (Done(), send, send)
            return send
        recv = np.zeros_like(send)  # finite while in flight, should a NaN check look at it
        _in_flight[id(recv)] = (comm.start_sum(send, recv), send, recv)
        comm.progress()  # also moves along the buckets started before this one
        return recv

    return run


def allreduce_wait(op):
    average = op.attr("average")
    shapes = [tuple(op.block.var(n).shape) for n in op.input("X")]
    ends = np.cumsum([int(np.prod(s, dtype=np.int64)) for s in shapes]).tolist()

    def run(flat, *xs):
        entry = _in_flight.pop(id(flat), None)
        if entry is None or entry[2] is not flat:
            raise DistributedError("its Buffer is not the output of an allreduce_start that is still in flight")
        comm = communicator()
        comm.wait(entry[0])
        if average and comm.size > 1:
            flat = flat / np.asarray(comm.size, flat.dtype)
        out = tuple(flat[b:e].reshape(s) for b, e, s in zip([0] + ends[:-1], ends, shapes))
        return out[0] if len(out) == 1 else out

    return run


def broadcast(op):
    root = op.attr("root")

    def run(*xs):
        comm = communicator()
        out = tuple(comm.broadcast(x, root) for x in xs)
        return out[0] if len(out) == 1 else out

    return run


KERNELS = {"allreduce_start": allreduce_start, "allreduce_wait": allreduce_wait, "broadcast": broadcast}
