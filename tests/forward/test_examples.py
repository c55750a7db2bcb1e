"""Forward and reverse mode agree on the bundled example networks (MLP, CNN, RNN with a while loop)."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.framework.tools.examples import EXAMPLES

from .helpers import dot_product_sides


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_dot_product_on_the_example(name):
    example = EXAMPLES[name]()
    scope = Scope()
    Executor().run(example.startup, scope=scope)
    params = example.params or example.main.global_block().all_parameters()
    assert params
    lhs, rhs = dot_product_sides(example.main, [example.loss], list(params), example.feed,
                                 np.random.default_rng(9), scope)
    assert lhs == pytest.approx(rhs, rel=1e-10)
