"""Forward-over-reverse Hessian-vector products equal reverse-over-reverse ones, for every op.

For loss = sum(out * r), H v is both the tangent of d loss/dx along v
(``forward_gradients`` of the gradients) and the gradient of <d loss/dx, v>
(``gradients`` of the gradients).
"""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, forward_gradients, gradients
from gradgen.program import layers, program_guard, Program

from .cases import float64_cases
from .helpers import one_op, unfrozen


@pytest.mark.parametrize("case", float64_cases(), ids=lambda c: c.id)
def test_forward_over_reverse_equals_reverse_over_reverse(case):
    main, outs, ins, feed = one_op(case)
    ins = unfrozen(main, ins)  # batch norm's running statistics get no first-order gradient: H is not symmetric there
    rng = np.random.default_rng(3)
    with program_guard(main, Program()):
        rs = [layers.data(f"r@{y.name}", list(y.shape), y.dtype) for y in outs]
        loss = layers.sum([layers.reduce_sum(y * r) for y, r in zip(outs, rs)]) if len(outs) > 1 \
            else layers.reduce_sum(outs[0] * rs[0])
        grads = gradients(loss, ins)
        kept = [(x, g) for x, g in zip(ins, grads) if g is not None]
        vs = [layers.data(f"v@{x.name}", list(x.shape), x.dtype) for x in ins]
        forward = forward_gradients([g for _, g in kept], ins, vs) if kept else []
        inner = [layers.reduce_sum(g * vs[ins.index(x)]) for x, g in kept]
        reverse = gradients(layers.sum(inner) if len(inner) > 1 else inner[0], ins) if kept else []
    feed = {**feed, **{r.name: rng.standard_normal(r.shape) for r in rs},
            **{v.name: rng.standard_normal(v.shape) for v in vs}}
    exe = Executor()
    # Over an empty axis a reduction such as logsumexp is -inf, and the loss sum(out * r) is then inf - inf = NaN:
    # expected there (the gradients compared are of the empty input), so only those cases silence the warning.
    empty = any(np.size(v) == 0 for v in feed.values())
    with np.errstate(invalid="ignore" if empty else "warn"):
        hv_forward = {x.name: (exe.run(main, feed=feed, fetch_list=[hv])[0] if hv is not None
                               else np.zeros(x.shape)) for (x, _), hv in zip(kept, forward)}
        hv_reverse = {x.name: (exe.run(main, feed=feed, fetch_list=[h])[0] if h is not None else np.zeros(x.shape))
                      for x, h in zip(ins, reverse)}
    for x, _ in kept:
        np.testing.assert_allclose(hv_forward[x.name], hv_reverse[x.name], rtol=1e-10, atol=1e-12,
                                   err_msg=f"H v for {x.name}")
