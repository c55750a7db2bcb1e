"""``feed_cast``'s rule: floats may round to a narrower float; every other conversion keeps every value exactly."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.tools.feed_cast import CastError, cast_feed


def test_the_rule_rounds_only_floats_and_keeps_everything_else_exact():
    narrowed = cast_feed("x", np.array([0.1, np.nan, -np.inf]), "float32")
    assert narrowed.dtype == np.float32 and narrowed[0] == np.float32(0.1) and np.isnan(narrowed[1])
    assert cast_feed("n", np.array([3, -7], np.int64), "int32").tolist() == [3, -7]
    assert cast_feed("n", np.array(2 ** 24, np.int64), "float32") == 2 ** 24
    assert cast_feed("b", np.array([0, 1]), "bool").tolist() == [False, True]
    for value, dtype in ((np.array([2 ** 40]), "int32"), (np.array(2 ** 24 + 1), "float32"),
                         (np.array([0, 2]), "bool"), (np.array([np.nan]), "int64")):
        with pytest.raises(CastError, match="without changing it"):
            cast_feed("v", value, dtype)
