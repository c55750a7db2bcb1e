"""Parameter files: round trip, checks against the program, atomic writes, no pickle."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.framework.errors import ParamFileError
from gradgen.framework.io import load_params, save_params
from gradgen.program import Program, layers, program_guard


def _model():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3], "float64")
        w = layers.create_parameter([3, 2], "float64", name="w")
        b = layers.create_parameter([2], "float64", name="b")
        layers.reduce_sum(x @ w + b)
    scope = Scope()
    Executor().run(startup, scope=scope)
    return main, scope


def test_round_trip(tmp_path):
    main, scope = _model()
    assert save_params(tmp_path / "p.npz", main, scope) == ["w", "b"]
    other = Scope()
    assert load_params(tmp_path / "p.npz", main, other) == ["w", "b"]
    np.testing.assert_array_equal(other["w"], scope["w"])
    np.testing.assert_array_equal(other["b"], scope["b"])


@pytest.mark.parametrize("arrays,message", [
    ({"w": np.zeros((3, 2))}, "missing persistable var(s) 'b'"),
    ({"w": np.zeros((2, 3)), "b": np.zeros(2)}, "'w' is float64[2, 3] in the file but the program declares float64[3, 2]"),
    ({"w": np.zeros((3, 2), np.float32), "b": np.zeros(2)}, "'w' is float32[3, 2]"),
    ({"w": np.zeros((3, 2)), "extra": np.zeros(1)}, "holds 'extra', which is not a persistable var"),
])
def test_mismatches_are_clear_errors_and_change_nothing(tmp_path, arrays, message):
    main, scope = _model()
    before = scope["w"].copy()
    np.savez(tmp_path / "p.npz", **arrays)
    with pytest.raises(ParamFileError) as err:
        load_params(tmp_path / "p.npz", main, scope)
    assert message in str(err.value)
    np.testing.assert_array_equal(scope["w"], before)


def test_corrupt_and_missing_files(tmp_path):
    main, scope = _model()
    (tmp_path / "bad.npz").write_bytes(b"not a zip file")
    with pytest.raises(ParamFileError, match="not a gradgen parameter file"):
        load_params(tmp_path / "bad.npz", main, scope)
    with pytest.raises(ParamFileError, match="no such parameter file"):
        load_params(tmp_path / "none.npz", main, scope)


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    main, scope = _model()
    np.savez(tmp_path / "p.npz", w=np.array([object()], dtype=object), b=np.zeros(2))
    with pytest.raises(ParamFileError):
        load_params(tmp_path / "p.npz", main, scope)


def test_a_failed_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    main, scope = _model()
    path = tmp_path / "p.npz"
    save_params(path, main, scope)
    old = path.read_bytes()
    scope.set("w", scope["w"] + 1.0)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save_params(path, main, scope)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["p.npz"]  # no temp file left behind


def _scope_of(arrays: dict) -> tuple[Program, Scope]:
    """A program declaring one persistable var per array, and a scope holding them."""
    main = Program()
    block = main.global_block()
    for name, array in arrays.items():
        block.create_var(name, array.shape, array.dtype.name, persistable=True)
    scope = Scope()
    scope.update(arrays)
    return main, scope


HOSTILE_NAMES = ["file", "allow_pickle", "args", "kwds", "a/b", "..", "../../etc/passwd", "/abs", "x.npy",
                 "naïve", "名前", "w@GRAD@RENAME@1", "a\\b", " spaced ", "arr_0"]


def test_every_var_round_trips_under_its_exact_name(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal((i % 3 + 1, 2)) for i, n in enumerate(HOSTILE_NAMES)}
    main, scope = _scope_of(arrays)
    path = tmp_path / "p.npz"
    assert save_params(path, main, scope) == HOSTILE_NAMES
    other = Scope()
    assert load_params(path, main, other) == HOSTILE_NAMES
    for name, array in arrays.items():
        np.testing.assert_array_equal(other[name], array)
    assert [p.name for p in tmp_path.iterdir()] == ["p.npz"]  # nothing was extracted anywhere


def test_ten_thousand_vars_round_trip(tmp_path):
    arrays = {f"v{i}": np.full((2,), i, dtype=np.int64) for i in range(10_000)}
    main, scope = _scope_of(arrays)
    save_params(tmp_path / "p.npz", main, scope)
    other = Scope()
    assert len(load_params(tmp_path / "p.npz", main, other)) == 10_000
    assert all(int(other[f"v{i}"][1]) == i for i in range(10_000))


def test_files_stay_readable_by_numpy(tmp_path):
    main, scope = _model()
    save_params(tmp_path / "p.npz", main, scope)
    with np.load(tmp_path / "p.npz", allow_pickle=False) as archive:
        assert archive.files == ["w", "b"]
        np.testing.assert_array_equal(archive["w"], scope["w"])


def test_a_name_with_nul_is_refused_before_anything_is_written(tmp_path):
    main, scope = _scope_of({"a\0b": np.zeros(2)})
    with pytest.raises(ParamFileError, match="NUL"):
        save_params(tmp_path / "p.npz", main, scope)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content,message", [
    (lambda p: np.save(p, np.zeros(3)), "not a gradgen parameter file"),
    (lambda p: p.mkdir(), "is a directory"),
])
def test_files_that_are_not_archives_are_clear_errors(tmp_path, content, message):
    main, scope = _model()
    content(tmp_path / "p.npz")
    target = tmp_path / "p.npz"
    if not target.exists():  # np.save appended .npy
        (tmp_path / "p.npz.npy").rename(target)
    with pytest.raises(ParamFileError, match=message):
        load_params(target, main, scope)
@pytest.mark.parametrize("strict", [True, False])
def test_arrays_the_program_does_not_declare_are_skipped_when_it_is_fully_covered(tmp_path, strict):
    main, scope = _model()
    np.savez(tmp_path / "p.npz", w=np.ones((3, 2)), b=np.ones(2), learning_rate_float64_0=np.array(0.1))
    assert load_params(tmp_path / "p.npz", main, scope, strict=strict) == ["w", "b"]
    assert "learning_rate_float64_0" not in scope
    np.testing.assert_array_equal(scope["w"], np.ones((3, 2)))


def test_a_file_matching_nothing_is_an_error_even_when_not_strict(tmp_path):
    main, scope = _model()
    np.savez(tmp_path / "p.npz", param_0=np.ones((3, 2)))
    with pytest.raises(ParamFileError, match="holds 'param_0'.*'w', 'b' are not in the file"):
        load_params(tmp_path / "p.npz", main, scope, strict=False)
