"""Program files that are malformed or hostile: each is one SerializationError, never a crash or a hang."""
from __future__ import annotations

import json

import pytest

from gradgen.program import Program, layers, program_guard
from gradgen.program.errors import OpError, ProgramError, SerializationError


def _cond_program() -> dict:
    main = Program()
    with program_guard(main, Program()):
        p = layers.data("p", [1], "bool")
        a = layers.data("a", [2], "float64")
        layers.cond(p, lambda: a * 2.0, lambda: a * 3.0)
    return json.loads(main.to_json())


@pytest.mark.parametrize("text,message", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"format": "gradgen-program", "version": 1' + "0" * 5000 + "}", "5001 digits is too long"),
    ('{"format": "gradgen-program", "version": -1' + "0" * 30 + "}", "too long"),
    ('{"format": "gradgen-program", "version": 99999999999999999999}', "does not fit in 64 bits"),
    ('{"format": "gradgen-program", "version": 1, "random_seed": NaN}', "NaN is not JSON"),
    ('{"format": "gradgen-program", "version": 1, "random_seed": Infinity}', "Infinity is not JSON"),
    ('{"format": "gradgen-program", "version": 1, "random_seed": -Infinity}', "-Infinity is not JSON"),
    ('{"format": "gradgen-program", "version": 1, "random_seed": 1e999}', "1e999 does not fit"),
], ids=["deep-brackets", "5000-digit-int", "30-digit-negative-int", "20-digit-int", "NaN", "Infinity", "-Infinity",
        "1e999"])
def test_hostile_json_is_a_serialization_error(text, message):
    with pytest.raises(SerializationError, match=message):
        Program.from_json(text)


def test_non_finite_attrs_still_round_trip_in_their_own_spelling():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        layers.clip(x, float("-inf"), float("inf"))
    text = main.to_json()
    assert "Infinity" not in text
    assert Program.from_json(text).to_json() == text


@pytest.mark.parametrize("op_type", ["split", "concat"])
def test_rank_0_input_to_split_and_concat_is_an_error_on_load(op_type):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2], "float64")
        if op_type == "split":
            layers.split(x, 2)
        else:
            layers.concat([x, x])
    data = json.loads(main.to_json())
    data["blocks"][0]["vars"][0]["shape"] = []
    with pytest.raises(SerializationError, match=rf"op #0 \({op_type}\).*rank >= 1"):
        Program.from_json(json.dumps(data))


def test_rank_0_input_to_split_and_concat_is_an_error_when_building():
    with program_guard(Program(), Program()):
        x = layers.data("x", [], "float64")
        with pytest.raises(OpError, match="rank >= 1"):
            layers.concat([x, x])
        with pytest.raises(OpError, match="rank >= 1"):
            layers.split(x, [1])
        with pytest.raises(ProgramError, match="axis 0 is out of range for 'x' of rank 0"):
            layers.split(x, 2)


def _own_branch_vars_in(data: dict, block: int) -> None:
    """Copy the branch blocks' vars into ``block``, so that only the block structure is wrong."""
    have = {v["name"] for v in data["blocks"][block]["vars"]}
    for b in data["blocks"][1:]:
        data["blocks"][block]["vars"] += [v for v in b["vars"] if v["name"] not in have]


@pytest.mark.parametrize("owned", [0, "self"])
def test_an_op_owning_its_own_block_or_an_ancestor_is_refused(owned):
    data = _cond_program()
    if owned == 0:  # the cond op in block 0 owns block 0 itself
        _own_branch_vars_in(data, 0)
        data["blocks"][0]["ops"][-1]["attrs"]["true_block"] = 0
        where = r"block 0, op #0 \(cond\)"
    else:  # an op inside block 1 owns block 1 (its own block)
        inner = dict(data["blocks"][0]["ops"][-1])
        inner["inputs"] = {"Cond": ["p"], "Input": ["a"]}
        inner["outputs"] = {"Out": [data["blocks"][1]["ops"][-1]["outputs"]["Out"][0] + "_x"]}
        data["blocks"][1]["vars"].append(dict(data["blocks"][1]["vars"][-1], name=inner["outputs"]["Out"][0]))
        inner["attrs"] = dict(inner["attrs"], true_block=1, false_block=1,
                              false_outs=inner["attrs"]["true_outs"])
        data["blocks"][1]["ops"].append(inner)
        where = "block 1, op #"
    with pytest.raises(SerializationError, match=rf"{where}.*owns block \d, whose parent is block -?\d, not block"):
        Program.from_json(json.dumps(data))


def test_a_block_attr_out_of_range_is_refused():
    data = _cond_program()
    data["blocks"][0]["ops"][-1]["attrs"]["true_block"] = 7
    with pytest.raises(SerializationError):
        Program.from_json(json.dumps(data))


def test_a_dict_with_attrs_nested_without_limit_is_an_error():
    from gradgen.program.serialize import program_from_dict

    data = _cond_program()
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    data["blocks"][0]["ops"][-1]["attrs"]["true_outs"] = deep
    with pytest.raises(SerializationError, match="nested too deeply"):
        program_from_dict(data, into=Program())
