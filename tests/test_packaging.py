"""gradgen installs as one namespace: ``gradgen.program``, ``gradgen.grad_makers``, ``gradgen.framework``."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"gradgen." + ".".join(p.parent.relative_to(ROOT).parts)
             for top in ("program", "grad_makers", "framework") for p in (ROOT / top).rglob("__init__.py")}
    assert found == listed


def test_user_files_named_like_the_packages_do_not_shadow_gradgen(tmp_path):
    for name in ("program", "framework", "grad_makers"):
        (tmp_path / f"{name}.py").write_text("raise SystemExit('the user module was imported')\n")
    result = _python("from gradgen.program import Program, program_guard, layers\n"
                     "from gradgen.framework import Executor, append_backward, optimizer\n"
                     "print(Program.__module__, Executor.__module__, optimizer.__name__)", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gradgen.program.program", "gradgen.framework.runtime.executor",
                                     "gradgen.framework.optimizer"]


def test_a_user_file_named_function_does_not_shadow_gradgen_framework_function(tmp_path):
    (tmp_path / "function.py").write_text("raise SystemExit('the user module was imported')\n")
    result = _python("from gradgen.framework import Function, function\n"
                     "print(type(function(lambda x: x)) is Function)", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]


def test_no_bare_top_level_modules_are_installed(tmp_path):
    for name in ("program", "framework", "grad_makers", "function"):
        result = _python(f"import {name}", tmp_path)
        assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr


def test_help_and_version_import_neither_scipy_nor_networkx(tmp_path):
    code = ("import sys\nfrom gradgen.framework.tools.cli import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('scipy', 'networkx') if m in sys.modules))")
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_python_dash_m_gradgen_framework_runs_the_cli(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gradgen.framework", "--version"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("gradgen ")


def test_public_modules_list_their_api():
    from gradgen import framework
    from gradgen.framework import optimizer
    from gradgen.program import layers

    for module in (framework, optimizer, layers):
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
        assert "annotations" not in module.__all__
