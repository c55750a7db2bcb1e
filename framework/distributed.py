"""What a training loop does differently on many ranks: read its own shard, and let only rank 0 write.

    comm = init_parallel()
    for step in range(steps):
        exe.run(main, feed=shard_feed(batch(step)), fetch_list=[loss])
    save_params_on_rank0("params.npz", main, scope)

Shards are contiguous and equal: rank r of w gets rows [r n / w, (r + 1) n / w)
of each batch axis, so the ranks' shards, concatenated in rank order, are the
batch. With a mean loss and ``data_parallel(average=True)``, training on w
ranks then computes what one process computes on the whole batch.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from .errors import DistributedError
from .io import save_params
from .runtime.communicator import Communicator, communicator

__all__ = ["shard", "shard_feed", "save_params_on_rank0"]


def shard(name: str, value: Any, rank: int, world: int, axis: int = 0) -> np.ndarray:
    """Rank ``rank``'s equal, contiguous part of ``value`` along ``axis`` (a 0-d value is every rank's)."""
    array = np.asarray(value)
    if array.ndim == 0 or world == 1:
        return array
    if not -array.ndim <= axis < array.ndim:
        raise DistributedError(f"feed '{name}' has shape {list(array.shape)}: it has no batch axis {axis}")
    n = array.shape[axis]
    if n % world:
        raise DistributedError(f"feed '{name}' has {n} rows on axis {axis} (shape {list(array.shape)}), which do "
                               f"not split evenly over {world} ranks")
    part = n // world
    return np.take(array, np.arange(rank * part, (rank + 1) * part), axis=axis)


def shard_feed(feed: Mapping[str, Any], comm: Communicator | None = None,
               axes: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """This rank's shard of every feed: along axis 0, or ``axes[name]``; 0-d feeds are replicated.

    >>> shard_feed({"x": np.arange(8).reshape(4, 2)}, Solo())["x"].shape
    (4, 2)
    """
    comm = communicator() if comm is None else comm
    axes = axes or {}
    unknown = set(axes) - set(feed)
    if unknown:
        raise DistributedError(f"shard axes name feeds that are not fed: {', '.join(sorted(unknown))}")
    return {name: shard(name, value, comm.rank, comm.size, axes.get(name, 0)) for name, value in feed.items()}


def save_params_on_rank0(path: str | os.PathLike, program, scope, comm: Communicator | None = None) -> list[str]:
    """Rank 0 writes the parameter file; every rank returns once it is complete (the ranks hold equal values)."""
    comm = communicator() if comm is None else comm
    written = save_params(path, program, scope) if comm.rank == 0 else []
    comm.barrier()
    return written
