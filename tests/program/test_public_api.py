"""Every module of program/ lists its API in ``__all__``, and the names users import keep working."""
from __future__ import annotations

import ast
import importlib
import pkgutil

import pytest

import gradgen.program

MODULES = ["gradgen.program"] + [m.name for m in pkgutil.walk_packages(gradgen.program.__path__, "gradgen.program.")]


def _defined_here(module) -> list[str]:
    """Public names a module binds itself (def, class, assignment), not ones it imports."""
    tree = ast.parse(open(module.__file__).read())
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_")]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_lists_what_it_defines_in_all(name):
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list) and module.__all__, name
    assert len(set(module.__all__)) == len(module.__all__)
    for entry in module.__all__:
        assert entry == "verify" or hasattr(module, entry), f"{name}.__all__ lists {entry!r}, which it lacks"
    assert not {"annotations", "TYPE_CHECKING", "Iterable", "Any"} & set(module.__all__)
    missing = set(_defined_here(module)) - set(module.__all__)
    assert not missing, f"{name} defines {sorted(missing)} without listing them in __all__"


def test_what_users_import_still_imports():
    importlib.import_module("gradgen.program.verifier")  # importing the module must not shadow the function
    from gradgen.program import (Block, Operator, Program, Variable, default_main_program, layers, program_guard,
                                 verify)

    assert callable(verify) and layers.fc and Program and Block and Operator and Variable and program_guard
    assert default_main_program().global_block() is not None
    star: dict = {}
    exec("from gradgen.program import *", star)  # noqa: S102 - a fixed string, to check __all__ resolves
    assert {"Program", "layers", "verify", "OP_SCHEMAS"} <= star.keys()
