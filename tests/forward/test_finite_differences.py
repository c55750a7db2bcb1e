"""Forward mode agrees with central finite differences of the program along the tangent, for every op."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, forward_gradients

from .cases import at_a_kink, float64_cases
from .helpers import one_op, unfrozen

EPS = 1e-6
# dropout draws a new mask on every run
CASES = [c for c in float64_cases() if c.op != "dropout" and not at_a_kink(c)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_tangent_matches_finite_differences(case):
    main, outs, ins, feed = one_op(case)
    outs, ins = unfrozen(main, outs), unfrozen(main, ins)
    rng = np.random.default_rng(11)
    directions = {x.name: rng.standard_normal(x.shape) for x in ins}
    block = main.global_block()
    vs = [block.create_var(f"v@{x.name}", x.shape, x.dtype, stop_gradient=True) for x in ins]
    tangents = forward_gradients(outs, ins, vs)
    exe, scope = Executor(), Scope()
    fed = {**feed, **{v.name: directions[x.name] for x, v in zip(ins, vs)}}
    got = exe.run(main, feed=fed, fetch_list=[t for t in tangents if t is not None], scope=scope)

    def at(sign):
        moved = {**fed, **{x.name: feed[x.name] + sign * EPS * directions[x.name] for x in ins}}
        return exe.run(main, feed=moved, fetch_list=outs, scope=scope)

    numeric = [(p - m) / (2 * EPS) for p, m in zip(at(1.0), at(-1.0))]
    values = iter(got)
    for y, t, want in zip(outs, tangents, numeric):
        have = next(values) if t is not None else np.zeros_like(want)
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=f"tangent of {y.name}")
