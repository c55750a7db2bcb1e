"""``gradgen.framework.paddle``: what Paddle 1.x book code takes from ``import paddle``, over gradgen.

    from gradgen.framework import paddle      # instead of: import paddle
    from gradgen.framework import fluid       # instead of: import paddle.fluid as fluid

``paddle.batch`` groups a reader's samples; ``paddle.reader`` has ``shuffle`` and ``buffered``;
``paddle.dataset`` has the book's data sets (``uci_housing``, ``mnist``), read from the files Paddle
downloads into ``paddle.dataset.common.DATA_HOME``: gradgen downloads nothing, and a missing file is an
error that says which file to put where. ``paddle.fluid`` is the facade itself.
"""
from __future__ import annotations

from .. import fluid
from ..data import batch
from . import dataset, reader

__all__ = ["batch", "reader", "dataset", "fluid"]
