"""Programs with control flow print their sub-blocks nested, verify, and round-trip through JSON."""
from __future__ import annotations

import re

import numpy as np

from gradgen.program import Program, verify

from .rnn import build, feed_for, run


def test_print_nests_forward_and_gradient_sub_blocks_under_their_ops():
    main, _, _ = build()
    text = str(main)
    lines = text.splitlines()
    owners = [i for i, line in enumerate(lines) if re.search(r"= while\(", line)]
    assert len(owners) == 2  # the loop and its gradient loop
    for i in owners:
        indent = len(lines[i]) - len(lines[i].lstrip())
        nested = lines[i + 1]
        assert re.match(r"\s+block \d+ \(parent 0\):", nested) and len(nested) - len(nested.lstrip()) > indent
    assert "<- grad of #1 while" in text
    assert "backward:" in text.split("<- grad of #1 while", 1)[1]  # the gradient body holds backward ops


def test_json_round_trip_is_exact_and_the_loaded_program_computes_the_same_gradients(tmp_path):
    main, loss, grads = build()
    path = tmp_path / "rnn.json"
    main.save(path)
    loaded = Program.load(path)
    assert loaded.to_json() == main.to_json()
    assert len(loaded.blocks) == len(main.blocks) > 3
    verify(loaded)
    feed = feed_for(4)
    fetch = [loss.name] + [g.name for g in grads]
    for a, b in zip(run(main, fetch, feed), run(loaded, fetch, feed)):
        np.testing.assert_array_equal(a, b)


def test_the_gradient_body_recomputes_only_what_the_gradient_reads():
    main, _, _ = build()
    grad_loop = next(op for op in main.global_block().ops if op.type == "while" and op.role == "backward")
    body = main.block(grad_loop.attr("body_block"))
    types = [op.type for op in body.ops]
    assert types.count("tanh") == 1 and types.count("matmul") == 3  # one recomputed, two for the gradients
    assert not any(op.type == "elementwise_add" and body.var(op.output_arg_names[0]).dtype == "int64"
                   for op in body.ops)  # the forward counter's increment feeds no gradient
    assert set(body.vars) >= set(grad_loop.attr("body_params"))


def test_clone_for_test_drops_the_gradient_sub_blocks_and_renumbers_the_rest():
    main, loss, _ = build()
    test = main.clone(for_test=True)
    assert len(test.blocks) == 3  # block 0, the loop's condition and body
    loop = next(op for op in test.global_block().ops if op.type == "while")
    assert {loop.attr("cond_block"), loop.attr("body_block")} == {1, 2}
    assert all(op.role == "forward" for b in test.blocks for op in b.ops)
    verify(test)
    feed = feed_for(3)
    np.testing.assert_array_equal(run(test, [loss.name], feed)[0], run(main, [loss.name], feed)[0])


def test_verify_names_an_unlisted_outer_read_and_an_outer_write_in_a_sub_block():
    import json

    from gradgen.program.errors import VerificationError
    import pytest

    main, _, _ = build()
    data = json.loads(main.to_json())
    loop = next(o for o in data["blocks"][0]["ops"] if o["type"] == "while")
    loop["inputs"]["Input"] = [n for n in loop["inputs"]["Input"] if n != "w"]
    body = data["blocks"][loop["attrs"]["body_block"]]
    body["ops"][-1]["outputs"]["Out"] = ["c"]  # the body's last op now writes the outer feed 'c'
    with pytest.raises(VerificationError) as caught:
        verify(Program.from_json(json.dumps(data)))
    assert "read 'w' from an enclosing block, but its Input slot does not list it" in str(caught.value)
    assert "op #5 (tanh), created at rnn.py" in str(caught.value)
    assert "writes 'c', a var of an enclosing block" in str(caught.value)
