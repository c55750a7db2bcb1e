"""Training on a device that is not jax's default, in its own process: what a GPU run does, on a machine without one.

jax is started with two CPU devices (``--xla_force_host_platform_device_count=2``, which must be set before jax
starts) and the xla runner's ``device_for`` maps ``CUDAPlace(0)`` to the second. Feeds and scope values are then
placed on that device (jax arrays on the default device moved there), the executable compiled for it, the
updated values donated and committed there, and the fetches copied back, as on a GPU. Prints one JSON line for
``test_xla_executor.py`` to check.
"""
from __future__ import annotations

import json
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from gradgen.framework import CUDAPlace, Executor, Scope  # noqa: E402
from gradgen.framework.backend.xla import runner as xla_runner  # noqa: E402
from tests.backends.test_xla_executor import _feed, _regression  # noqa: E402
from tests.control_flow import rnn  # noqa: E402


def _runs(place, second) -> dict:
    main, startup, loss = _regression("float64")
    exe, scope = Executor(place, backend="xla"), Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed=_feed(8, "float64", s), fetch_list=[loss], scope=scope)[0]) for s in range(5)]
    with jax.enable_x64(True):  # a feed already on jax's default device moves to the executor's
        on_default = {k: jax.device_put(v, jax.devices("cpu")[0]) for k, v in _feed(8, "float64", 5).items()}
    losses.append(float(exe.run(main, feed=on_default, fetch_list=[loss], scope=scope)[0]))
    on = [str(d) for d in scope.own("w").devices()]
    loop, loop_loss, grads = rnn.build()
    fetched = exe.run(loop, feed=rnn.feed_for(70), fetch_list=[loop_loss, *grads], scope=Scope())  # past 64 rows
    return {"losses": losses, "w_on": on, "rnn": [np.asarray(f).tolist() for f in fetched]}


def main() -> None:
    second = jax.devices("cpu")[1]
    xla_runner.device_for = lambda place: second if isinstance(place, CUDAPlace) else None
    print(json.dumps({"second": str(second), "default": _runs(None, second), "placed": _runs(CUDAPlace(0), second)}))


if __name__ == "__main__":
    main()
