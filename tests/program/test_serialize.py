"""The JSON format: round trips, determinism, versions, and a strict loader for bad files."""
import json

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradgen.program import Program, SerializationError, layers, program_guard, verify


def _example():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 4], "float64")
        w = layers.create_parameter([4, 3], "float64", name="w")
        h = layers.clip(layers.relu(x @ w), 0.0, float("inf"))
        parts = layers.split(h, [1, 2], axis=1)
        layers.reduce_sum(layers.concat(parts[::-1], axis=1), dim=[0])
    return main


def test_round_trip_is_byte_identical_and_deterministic(tmp_path):
    main = _example()
    text = main.to_json()
    assert Program.from_json(text).to_json() == text
    assert _example().to_json() == text
    main.save(tmp_path / "p.json")
    loaded = Program.load(tmp_path / "p.json")
    assert loaded.to_json() == text and str(loaded) == str(main)
    json.loads(text)  # strict JSON: inf is spelled as a string, not Infinity


def test_a_newer_format_version_is_refused():
    data = json.loads(_example().to_json())
    data["version"] = 99
    with pytest.raises(SerializationError, match="version 99, newer than this gradgen reads"):
        Program.from_json(json.dumps(data))


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.pop("blocks"), "program has no field 'blocks'"),
    (lambda d: d.update(format="other"), "not a gradgen program"),
    (lambda d: d["blocks"][0]["ops"][0].update(type="nonsense"), "unknown op type 'nonsense'"),
    (lambda d: d["blocks"][0]["vars"][0].update(shape="big"), r"shape must be list"),
    (lambda d: d["blocks"][0]["ops"][0]["attrs"].update(transpose_x="yes"), "attr 'transpose_x' must be of kind bool"),
    (lambda d: d["blocks"][0]["ops"][0].update(inputs={"X": "x"}), "must map slot names to lists"),
])
def test_malformed_files_are_clear_errors(mutate, message):
    data = json.loads(_example().to_json())
    mutate(data)
    with pytest.raises(SerializationError, match=message):
        Program.from_json(json.dumps(data))


def test_not_json_and_missing_files(tmp_path):
    with pytest.raises(SerializationError, match="not valid JSON"):
        Program.from_json("{oops")
    with pytest.raises(SerializationError, match="cannot read program file"):
        Program.load(tmp_path / "missing.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SerializationError, match="not UTF-8"):
        Program.load(tmp_path / "bin.json")


def _broadcastable(a, b) -> bool:
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        return False
    return True


UNARY = ["relu", "tanh", "sigmoid", "exp", "square", "abs", "sin"]


@st.composite
def random_programs(draw):
    main = Program()
    with program_guard(main, Program()):
        shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        pool = [layers.data("x", shape, "float64"), layers.data("y", [shape[-1]], "float64")]
        for _ in range(draw(st.integers(1, 12))):
            kind = draw(st.sampled_from(["unary", "binary", "reduce", "transpose", "scale"]))
            a = draw(st.sampled_from(pool))
            if kind == "unary":
                out = getattr(layers, draw(st.sampled_from(UNARY)))(a)
            elif kind == "binary":
                b = draw(st.sampled_from([v for v in pool if _broadcastable(a.shape, v.shape)]))
                out = draw(st.sampled_from([layers.add, layers.multiply, layers.maximum]))(a, b)
            elif kind == "reduce" and len(a.shape) > 1:
                out = layers.reduce_sum(a, dim=draw(st.integers(0, len(a.shape) - 2)))
            elif kind == "transpose" and len(a.shape) > 1:
                perm = draw(st.permutations(range(len(a.shape))))
                out = layers.transpose(a, list(perm))
            else:
                out = layers.scale(a, draw(st.floats(-3, 3)), draw(st.floats(-1, 1)))
            pool.append(out)
    return main


@settings(max_examples=40, deadline=None)
@given(random_programs())
def test_random_valid_programs_round_trip_and_verify(main):
    text = main.to_json()
    loaded = Program.from_json(text)
    assert loaded.to_json() == text
    assert verify(loaded) == []
