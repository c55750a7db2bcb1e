"""Feeding data: batch and shuffle numpy arrays or sample generators into feed dicts, with a progress bar.

Two spellings of one job. gradgen's own, one progress bar for the whole run
with the latest loss beside it (on a terminal only):

    loader = DataLoader({"x": xs, "y": ys}, batch_size=32, shuffle=True, seed=0)
    for feed in loader.epochs(10):
        (loss_value,) = exe.run(main, feed=feed, fetch_list=[loss])
        loader.show(loss=loss_value)

and Paddle's readers (functions returning an iterator of samples, one tuple
per example) with ``batch``, ``shuffle`` and a ``DataFeeder`` that stacks a
minibatch of samples into arrays shaped like the data vars:

    reader = batch(shuffle(samples, buf_size=500), batch_size=20)
    feeder = DataFeeder(feed_list=[x, y])
    for minibatch in reader():
        exe.run(main, feed=feeder.feed(minibatch), fetch_list=[loss])

Shuffles draw from a seeded numpy Generator, so a given seed gives the same
order on every platform.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from gradgen.program.errors import GradgenError

Reader = Callable[[], Iterable[Any]]
"""A function returning a fresh iterator of samples (Paddle's reader protocol)."""


class DataError(GradgenError):
    """Data that cannot be batched or fed as asked: ragged arrays, samples of the wrong size or arity."""


def batch(reader: Reader, batch_size: int, drop_last: bool = False) -> Reader:
    """A reader of lists of ``batch_size`` samples from ``reader`` (the last one shorter unless ``drop_last``)."""
    if int(batch_size) <= 0:
        raise DataError(f"batch_size must be positive, got {batch_size}")

    def batched() -> Iterator[list]:
        group: list = []
        for sample in reader():
            group.append(sample)
            if len(group) == batch_size:
                yield group
                group = []
        if group and not drop_last:
            yield group

    return batched


def shuffle(reader: Reader, buf_size: int, seed: int | None = None) -> Reader:
    """A reader of ``reader``'s samples shuffled within consecutive buffers of ``buf_size`` samples."""
    if int(buf_size) <= 0:
        raise DataError(f"buf_size must be positive, got {buf_size}")
    rng = np.random.default_rng(seed)

    def shuffled() -> Iterator:
        buffer: list = []
        for sample in reader():
            buffer.append(sample)
            if len(buffer) == buf_size:
                yield from (buffer[i] for i in rng.permutation(len(buffer)))
                buffer = []
        yield from (buffer[i] for i in rng.permutation(len(buffer)))

    return shuffled


def _var_info(item) -> tuple[str, tuple[int, ...], str]:
    name = item if isinstance(item, str) else getattr(item, "name", None)
    if not isinstance(name, str):
        raise DataError(f"feed_list items must be Variables, got {type(item).__name__}")
    if isinstance(item, str):
        raise DataError(f"feed_list needs Variables (their shapes and dtypes say how to stack samples), got '{item}'")
    return name, tuple(item.shape), item.dtype


class DataFeeder:
    """Stacks a minibatch of samples (one tuple per example, one entry per var) into a feed dict.

    Each var's entries become one array of the var's dtype, shaped
    ``[batch] + var.shape[1:]`` when the var's first dim is the batch (-1),
    so a flat 784-vector feeds an ``[N, 1, 28, 28]`` image and a bare integer
    label an ``[N, 1]`` one, as in Paddle. ``place`` is accepted for
    Paddle's signature; gradgen runs on the CPU.
    """

    def __init__(self, feed_list: Sequence, place: Any = None, program: Any = None):
        self.vars = [_var_info(v) for v in feed_list]
        if not self.vars:
            raise DataError("DataFeeder needs at least one var in feed_list")
        self.place = place

    @property
    def feed_names(self) -> list[str]:
        return [name for name, _, _ in self.vars]

    def feed(self, minibatch: Sequence[Sequence[Any]]) -> dict[str, np.ndarray]:
        """``{var name: stacked array}`` for one minibatch."""
        samples = list(minibatch)
        columns: list[list] = [[] for _ in self.vars]
        for k, sample in enumerate(samples):
            if len(sample) != len(self.vars):
                raise DataError(f"sample {k} has {len(sample)} entries, but the feeder feeds {len(self.vars)} vars "
                                f"({', '.join(self.feed_names)})")
            for column, value in zip(columns, sample):
                column.append(value)
        return {name: _stack(name, shape, dtype, column) for (name, shape, dtype), column in zip(self.vars, columns)}


def _stack(name: str, shape: tuple[int, ...], dtype: str, column: list) -> np.ndarray:
    try:
        array = np.asarray(column, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise DataError(f"'{name}': the samples do not stack into one {dtype} array: {e}") from None
    if shape and shape[0] == -1 and all(d >= 0 for d in shape[1:]):
        target = (len(column),) + shape[1:]
        if array.size != int(np.prod(target)):
            raise DataError(f"'{name}': {len(column)} samples of {array.size // max(len(column), 1)} values each "
                            f"cannot fill the declared shape {list(shape)}")
        array = array.reshape(target)
    return array


class DataLoader:
    """Batches of feed dicts from numpy arrays or from a reader, optionally shuffled, with a progress bar.

    ``data`` is a mapping ``{name: array}`` (all of one length; examples are
    rows), or a reader (a function returning an iterator of samples) together
    with ``feed_list`` (the data vars, in sample order). Every pass over the
    loader reshuffles (when ``shuffle``) from one seeded generator; readers
    shuffle within a buffer of ``buf_size`` samples. The progress bar (tqdm)
    shows when ``progress`` is true and stderr is a terminal: ``epochs(n)``
    draws one for a whole run of ``n`` passes, ``show(loss=...)`` puts the
    latest loss beside it.
    """

    def __init__(self, data: Mapping[str, Any] | Reader, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, feed_list: Sequence | None = None,
                 buf_size: int = 1024, progress: bool = True, desc: str | None = None):
        if int(batch_size) <= 0:
            raise DataError(f"batch_size must be positive, got {batch_size}")
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), bool(shuffle), bool(drop_last)
        self.progress, self.desc, self.buf_size = progress, desc, int(buf_size)
        self.epoch = 0
        """The pass the latest batch is from (0-based)."""
        self._bar: Any = None
        self._shown: dict[str, float] = {}
        self._rng = np.random.default_rng(seed)
        self._arrays: dict[str, np.ndarray] | None = None
        if callable(data):
            if feed_list is None:
                raise DataError("a reader needs feed_list (the data vars, in the order of each sample's entries)")
            self._feeder, self._reader = DataFeeder(feed_list), data
        elif isinstance(data, Mapping):
            self._arrays = {name: np.asarray(a) for name, a in data.items()}
            lengths = {name: (a.shape[0] if a.ndim else None) for name, a in self._arrays.items()}
            if not lengths or None in lengths.values() or len(set(lengths.values())) != 1:
                raise DataError(f"arrays must be non-scalar and of one length (rows are examples), got "
                                f"{', '.join(f'{n}: {n_}' for n, n_ in lengths.items()) or 'none'}")
            self._count = next(iter(lengths.values()))
        else:
            raise DataError(f"data must be a mapping of arrays or a reader function, got {type(data).__name__}")

    def __len__(self) -> int:
        """Batches per pass (arrays only: a reader's length is unknown until it ends)."""
        if self._arrays is None:
            # len()'s protocol (list() relies on it) wants a TypeError here, not one of gradgen's errors.
            raise TypeError("a DataLoader over a reader has no length (it is known when the reader ends)")
        full, rest = divmod(self._count, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def _array_batches(self) -> Iterator[dict[str, np.ndarray]]:
        order = self._rng.permutation(self._count) if self.shuffle else np.arange(self._count)
        stop = self._count - self._count % self.batch_size if self.drop_last else self._count
        for start in range(0, stop, self.batch_size):
            rows = order[start:start + self.batch_size]
            yield {name: a[rows] for name, a in self._arrays.items()}

    def _reader_batches(self) -> Iterator[dict[str, np.ndarray]]:
        reader = self._reader
        if self.shuffle:
            reader = shuffle(reader, self.buf_size, seed=int(self._rng.integers(2**63)))
        for minibatch in batch(reader, self.batch_size, self.drop_last)():
            yield self._feeder.feed(minibatch)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        """One pass over the data. Its bar leaves the screen when the pass ends, so passes in a loop of the
        caller's own draw over one another instead of piling up; ``epochs(n)`` keeps one bar for the run."""
        return self._passes(1, leave=False)

    def epochs(self, count: int) -> Iterator[dict[str, np.ndarray]]:
        """Every batch of ``count`` passes (each shuffled afresh, as ``for feed in loader`` is) under one progress
        bar for the whole run, which stays on the screen at the end; ``self.epoch`` is the pass a batch is from.

        >>> for feed in loader.epochs(10):
        ...     (loss,) = exe.run(main, feed=feed, fetch_list=[avg_loss])
        ...     loader.show(loss=loss)
        """
        if int(count) < 0:
            raise DataError(f"epochs must be >= 0, got {count}")
        return self._passes(int(count), leave=True)

    def show(self, **values: Any) -> None:
        """Show numbers beside the progress bar (the latest fetched loss: ``loader.show(loss=loss)``); each name
        keeps its latest value until the run ends."""
        for name, value in values.items():
            if np.size(value) != 1:
                raise DataError(f"show({name}=...) takes one number (a fetched loss), got shape {np.shape(value)}")
            self._shown[name] = float(np.asarray(value).reshape(-1)[0])
        if self._bar is not None:
            self._bar.set_postfix(self._shown, refresh=False)

    def _passes(self, count: int, leave: bool) -> Iterator[dict[str, np.ndarray]]:
        total = count * len(self) if self._arrays is not None else None
        bar = tqdm(total=total, desc=self.desc, unit="batch", file=sys.stderr, leave=leave, dynamic_ncols=True,
                   disable=None if self.progress else True)
        self._bar, self._shown = bar, {}
        try:
            for epoch in range(count):
                self.epoch = epoch
                if count > 1:
                    bar.set_description(f"{self.desc + ': ' if self.desc else ''}epoch {epoch + 1}/{count}",
                                        refresh=False)
                for feed in self._array_batches() if self._arrays is not None else self._reader_batches():
                    yield feed
                    bar.update()
        finally:
            bar.close()
            self._bar = None


__all__ = ["DataLoader", "DataFeeder", "DataError", "batch", "shuffle", "Reader"]
