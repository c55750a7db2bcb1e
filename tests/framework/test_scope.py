"""Scope: a mapping of names to arrays with parent fallback."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Scope, global_scope


def test_scope_is_a_mapping_of_arrays():
    scope = Scope()
    scope.set("w", [1.0, 2.0])
    scope["b"] = 3.0
    assert isinstance(scope["w"], np.ndarray) and scope["b"].shape == ()
    assert "w" in scope and "nope" not in scope
    assert list(scope) == ["w", "b"] and len(scope) == 2
    assert scope.get("nope") is None
    with pytest.raises(KeyError):
        scope["nope"]
    scope.remove("w")
    assert "w" not in scope


def test_child_scope_reads_parent_and_writes_locally():
    parent = Scope()
    parent.set("w", np.ones(2))
    child = parent.new_scope()
    assert "w" in child and child["w"] is parent["w"]
    child.set("w", np.zeros(2))
    np.testing.assert_array_equal(parent["w"], np.ones(2))
    assert list(child) == ["w"]


def test_global_scope_is_one_object():
    assert global_scope() is global_scope()
