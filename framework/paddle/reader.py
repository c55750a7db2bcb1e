"""``paddle.reader``: Paddle's reader decorators ``shuffle`` and ``buffered``.

A reader is a function returning a fresh iterator of samples (``gradgen.framework.data.Reader``); a
decorator takes readers and returns a new one. ``shuffle`` draws from Python's ``random`` module as
Paddle's does, so ``random.seed(k)`` makes a run repeatable.
"""
from __future__ import annotations

import queue
import random
import threading
from typing import Iterator

from ..data import DataError, Reader

_END = object()
"""What the read-ahead thread puts last, after the reader's final sample."""


def shuffle(reader: Reader, buf_size: int) -> Reader:
    """A reader of ``reader``'s samples shuffled within consecutive buffers of ``buf_size`` samples."""
    if int(buf_size) <= 0:
        raise DataError(f"buf_size must be positive, got {buf_size}")

    def shuffled() -> Iterator:
        buffer: list = []
        for sample in reader():
            buffer.append(sample)
            if len(buffer) == buf_size:
                random.shuffle(buffer)
                yield from buffer
                buffer = []
        random.shuffle(buffer)
        yield from buffer

    return shuffled


def _put(q: queue.Queue, item, stop: threading.Event) -> bool:
    """Put ``item`` in ``q``, waiting for room unless ``stop`` is set first; whether it went in."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def buffered(reader: Reader, size: int) -> Reader:
    """A reader of ``reader``'s samples, read ahead by a thread into a buffer of at most ``size`` samples, so
    the next samples load while the program runs. An error of ``reader`` is raised where the sample it failed
    to make would have come; leaving the loop early stops the thread."""
    if int(size) <= 0:
        raise DataError(f"size must be positive, got {size}")

    def read_ahead() -> Iterator:
        samples: queue.Queue = queue.Queue(maxsize=int(size))
        stop = threading.Event()

        def fill() -> None:
            try:
                for sample in reader():
                    if not _put(samples, (sample, None), stop):
                        return
                _put(samples, (_END, None), stop)
            except BaseException as error:  # handed to the consumer, which raises it in its own thread
                _put(samples, (_END, error), stop)

        thread = threading.Thread(target=fill, name="paddle.reader.buffered", daemon=True)
        thread.start()
        try:
            while True:
                sample, error = samples.get()
                if sample is _END:
                    if error is not None:
                        raise error
                    return
                yield sample
        finally:
            stop.set()
            thread.join()

    return read_ahead


__all__ = ["shuffle", "buffered"]
