"""Where ``paddle.dataset`` finds its files: ``DATA_HOME/<data set>/<file>``, as Paddle keeps them."""
from __future__ import annotations

import os

from ...data import DataError

DATA_HOME = os.path.expanduser(os.path.join("~", ".cache", "paddle", "dataset"))
"""The folder above each data set's own folder: Paddle's download cache. Set it to read files kept elsewhere."""


def local_files(dataset: str, names: list[str], what: str) -> list[str]:
    """The paths of ``names`` in ``DATA_HOME/dataset``; a DataError naming the missing ones and ``what`` they
    are (the data set's files as Paddle downloads them) when any is not there."""
    folder = os.path.join(DATA_HOME, dataset)
    paths = [os.path.join(folder, name) for name in names]
    missing = [name for name, path in zip(names, paths) if not os.path.isfile(path)]
    if missing:
        raise DataError(f"paddle.dataset.{dataset}: {', '.join(missing)} not found in {folder}. gradgen downloads "
                        f"nothing, and no installed package ships this data set: put the files there as Paddle's "
                        f"own paddle.dataset.{dataset} downloads them ({what}), or set "
                        f"paddle.dataset.common.DATA_HOME to the folder that holds {dataset}/")
    return paths


__all__ = ["DATA_HOME", "local_files"]
