"""``gradgen show PROGRAM --backend torch``: the torch engine's steps, each with the op or joint pair it runs, the
kernel that runs it and the vars freed after it (``backend/torch/show.py``)."""
from __future__ import annotations

import re

from gradgen.framework.tools.cli import main
from gradgen.program import OP_SCHEMAS
from tests.backends.test_torch_backend import need_torch
from tests.framework.test_profile import _two_convs


def _steps(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("step ")]


def test_show_lists_every_op_once_in_run_order_with_its_kernel(tmp_path, capsys):
    need_torch()
    main_program = _two_convs()[0]
    main_program.save(str(tmp_path / "main.json"))
    assert main(["show", str(tmp_path / "main.json"), "--backend", "torch"]) == 0
    text = capsys.readouterr().out
    steps = _steps(text)
    ops = [int(i) for line in steps for i in re.findall(r"op #(\d+) ", line.split(" -> ")[0])]
    assert ops == list(range(len(main_program.global_block().ops)))  # each op once, in block order
    assert [int(line.split(":")[0].split()[1]) for line in steps] == list(range(len(steps)))
    joint = [line for line in steps if " + " in line.split(" -> ")[0]]
    assert len(joint) == 1 and re.search(r"op #\d+ conv2d_input_grad \+ op #\d+ conv2d_filter_grad -> ", joint[0])
    assert "joint kernel (conv.py: one call for 2 ops)" in joint[0]
    assert text.splitlines()[-1] == f"{len(steps)} steps for {len(ops)} ops (a joint kernel runs two), in block order"
    assert any("; frees " in line for line in steps)
    by_type = {line.split(" -> ")[0].split()[-1]: line for line in steps if " + " not in line.split(" -> ")[0]}
    assert "hand-written (linalg.py)" not in by_type["conv2d"]
    assert "its compute (gradgen.program.ops.optimizer)" in by_type["sgd"] and "its compute" in by_type["relu"]


def test_each_kind_of_kernel_is_named_by_where_it_comes_from():
    need_torch()
    from gradgen.framework.backend.torch.kernels import FASTER, KERNELS
    from gradgen.framework.backend.torch.show import kernel_source

    faster = sorted(FASTER)[0]
    assert kernel_source(faster).startswith("hand-written (") and FASTER[faster] in kernel_source(faster)
    written = next(t for t, s in sorted(OP_SCHEMAS.items()) if s.compute is None and t in KERNELS)
    assert re.fullmatch(r"hand-written \(\w+\.py\)", kernel_source(written)), kernel_source(written)
    with_aten = next(t for t, s in sorted(OP_SCHEMAS.items()) if s.aten is not None and t not in FASTER)
    assert "ATen call" in kernel_source(with_aten)
    assert kernel_source("allreduce_start").startswith("none: ")  # a collective: refused by the engine
    plain = next(t for t, s in sorted(OP_SCHEMAS.items())
                 if s.compute is not None and s.aten is None and t not in FASTER)
    assert kernel_source(plain).startswith("its compute (gradgen.program.")
