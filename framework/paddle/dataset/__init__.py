"""``paddle.dataset``: the Paddle book's data sets, read from the files Paddle's own modules download.

``uci_housing`` (chapter 01, fit a line) and ``mnist`` (chapter 02, recognize digits) read the files
from ``common.DATA_HOME`` (Paddle's ``~/.cache/paddle/dataset``, so a machine where Paddle once ran
has them) and yield the samples Paddle's readers yield. gradgen downloads nothing, and no installed
package ships either data set, so a missing file is a ``DataError`` that names the file, the folder and
what the file holds.
"""
from __future__ import annotations

from . import common, mnist, uci_housing

__all__ = ["common", "mnist", "uci_housing"]
