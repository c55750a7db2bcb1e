"""The data behind the explain page: links, var facts, the memory timeline, on every kind of program."""
import json

import pytest

from gradgen.framework.tools.explain import explain_page, page_model
from gradgen.framework.tools.var_kinds import KINDS

from .programs import deep_mlp, second_order_program, shared_use_program, trained_example


def _ops(model):
    return {op["id"]: op for b in model["blocks"] for op in b["ops"]}


@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_every_generated_op_links_to_a_real_op(name):
    program = trained_example(name)
    model = page_model(program)
    ops = _ops(model)
    for op in ops.values():
        assert all(ref in ops for ref in op["links"]), op
        if op["role"] != "forward" and op["origin"] == "grad":
            assert op["links"], op  # names the forward op it was made for
    for b in program.blocks:
        for i, op in enumerate(b.ops):
            if op.forward_op is not None:
                fwd = ops[f"b{b.idx}o{i}"]["links"][0]
                assert ops[fwd]["type"] == op.forward_op.type
                assert f"b{b.idx}o{i}" in ops[fwd]["linked_from"]  # and the forward op links back


def test_sum_names_every_contribution():
    model = page_model(shared_use_program())
    ops = _ops(model)
    sums = [op for op in ops.values() if op["type"] == "sum"]
    assert sums
    for op in sums:
        assert op["origin"] == "sum"
        assert len(op["links"]) == len(op["ins"])
        for ref, part in zip(op["links"], op["ins"]):
            assert part in ops[ref]["outs"]  # each link is the op that wrote that contribution
        assert op["origin_text"].startswith(f"accumulates {len(op['ins'])} contributions to {op['outs'][0]} from #")


def test_optimizer_ops_link_to_the_gradient_they_consume():
    model = page_model(trained_example("mlp"))
    ops = _ops(model)
    updates = [op for op in ops.values() if op["role"] == "optimize"]
    assert len(updates) == 2
    for op in updates:
        (ref,) = op["links"]
        grad = next(n for n in op["ins"] if n.endswith("@GRAD"))
        assert grad in ops[ref]["outs"]


def test_var_facts():
    model = page_model(trained_example("mlp"), {"x": [64, 1000], "y": [64, 10]})
    v = model["blocks"][0]["vars"]
    assert v["h@GRAD"]["grad_of"] == "h" and v["h@GRAD"]["kind"] == "gradient"
    assert v["h@GRAD"]["bytes"] == 64 * 100 * 8
    assert v["h_relu"]["kind"] == "activation" and v["h_relu"]["last_reader"] in v["h_relu"]["read_by"]
    ops = _ops(model)
    assert ops[v["h_relu"]["last_reader"]]["role"] == "backward"  # the backward part keeps it alive
    assert v["w1"]["parameter"] and v["w1"]["made_by"] == [op["id"] for op in ops.values() if op["type"] == "sgd"
                                                           and "w1" in op["outs"]]


def test_memory_timeline_stacks_every_kind_and_marks_the_peak():
    model = page_model(trained_example("mlp"), {"x": [64, 1000], "y": [64, 10]})
    mem = model["memory"]
    assert set(mem["kinds"]) == set(KINDS)
    peak = mem["steps"][mem["peak_step"]]
    assert all(len(s["kinds"]) == len(KINDS) for s in mem["steps"])
    assert sum(s["bytes"] for s in [peak]) <= mem["peak_bytes"]
    assert sum(r["bytes"] for r in mem["at_peak"]) == mem["peak_bytes"]
    assert mem["sentence"].startswith("Peak: ") and "%" in mem["sentence"]


def test_second_order_and_control_flow_programs_have_pages():
    for program in (second_order_program(), trained_example("rnn")):
        model = page_model(program)
        assert model["memory"] is not None, model["memory_error"]
        nested = [op for op in _ops(model).values() if op["blocks"]]
        assert all(b not in model["roots"] for op in nested for b in op["blocks"])


def test_page_is_self_contained_and_script_safe():
    program = deep_mlp(3)
    program.global_block().create_var("</script><b>", [2], "float64")
    html = explain_page(program)
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html and "<link" not in html and "src=" not in html
    assert html.count("</script>") == 2  # the model JSON cannot end its script element early
    start = html.index('class="gg-model">') + len('class="gg-model">')
    model = json.loads(html[start:html.index("</script>", start)])
    assert "</script><b>" in model["blocks"][0]["vars"]


def test_program_explain_and_repr_html_use_the_page():
    program = deep_mlp(2)
    assert program.explain().startswith("<!DOCTYPE html>")
    assert program._repr_html_().startswith('<div class="gradgen-explain">')


def test_recompute_what_if_rebuilds_the_same_backward_and_cuts_its_peak():
    from gradgen.framework.tools.explain.model import _loss_names
    from gradgen.framework.tools.explain.what_if import recompute_what_if
    from gradgen.framework.tools.memory import analyze_memory

    program = deep_mlp(50)
    (loss,) = _loss_names(program.global_block())
    what_if = recompute_what_if(program, {"x": [64, 64]}, loss)
    assert what_if.peak_without == analyze_memory(program, {"x": [64, 64]}, [loss]).peak_bytes
    assert len(what_if.checkpoints) == 7 and what_if.peak_with < what_if.peak_without / 2
    sentence = page_model(program, {"x": [64, 64]})["memory"]["sentence"]
    assert "Recomputing with 7 checkpoints" in sentence


def test_no_what_if_when_activations_are_not_the_peak():
    sentence = page_model(trained_example("mlp"), {"x": [64, 1000], "y": [64, 10]})["memory"]["sentence"]
    assert "Recomputing" not in sentence  # the mlp's peak is its staged weight update


def test_without_the_framework_the_page_says_what_to_import(monkeypatch):
    from gradgen.program import display
    from gradgen.program.errors import ProgramError

    monkeypatch.setattr(display, "_page_builder", [])
    program = deep_mlp(1)
    assert program._repr_html_() is None  # Jupyter falls back to repr instead of showing a traceback
    with pytest.raises(ProgramError, match="import gradgen.framework"):
        program.explain()
