"""design_docs/function.md stays true: its code runs, the GPT trains, and its line-count table matches its blocks.

Each counted block starts with a ``# tag: ...`` comment. The GPT blocks run for a few steps (the data block sets
``STEPS``; the test shortens it); the two gradgen forms must give the same losses to the last bit, since they
build the same program, and every form's loss must fall. The Hessian-vector products are checked against the
closed form. Lines are counted as the doc says: non-blank lines that are not comments.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from gradgen.framework import Scope, scope_guard
from gradgen.program import Program, program_guard
from tests.extras import require

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "design_docs" / "function.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
TAG = re.compile(r"^# ([\w-]+):")
STEPS = 25


def python_blocks(path: Path) -> dict[str, str]:
    """The tagged Python blocks of a Markdown file by tag; the untagged ones under ``untagged_K``."""
    blocks = {}
    for k, (lang, body) in enumerate(FENCE.findall(path.read_text())):
        if lang == "python":
            tag = TAG.match(body)
            blocks[tag.group(1) if tag else f"untagged_{k}"] = body
    return blocks


def lines(body: str) -> int:
    """Non-blank lines that are not comments."""
    return sum(1 for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#"))


BLOCKS = python_blocks(DOC)


def run(*tags: str, namespace: dict | None = None) -> tuple[dict, str]:
    """Run the blocks in order in one namespace; (the namespace, what they printed)."""
    namespace = {"__name__": "__function_doc__"} if namespace is None else namespace
    printed = io.StringIO()
    # the blocks use the default programs and the global scope, as a reader's script would: fresh ones here
    with contextlib.redirect_stdout(printed), program_guard(Program(), Program()), scope_guard(Scope()):
        for tag in tags:
            exec(compile(BLOCKS[tag], f"design_docs/function.md {tag}", "exec"), namespace)
            if tag == "gpt-data":
                namespace["STEPS"] = STEPS
    return namespace, printed.getvalue()


def falls(losses: list[float]) -> bool:
    return len(losses) == STEPS and np.mean(losses[-5:]) < 0.8 * np.mean(losses[:3])


def test_every_python_block_but_the_introduction_is_tagged():
    assert [tag for tag in BLOCKS if tag.startswith("untagged")] == ["untagged_0"]
    assert set(BLOCKS) >= {"gpt-data", "gpt-model", "gpt-function", "gpt-today", "gpt-torch", "hvp-function",
                           "hvp-today", "hvp-jax"}


def test_the_introduction_trains():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((16, 3)).astype("float32")
    namespace, _ = run("untagged_0", namespace={"xs": xs, "ys": xs.sum(1, keepdims=True)})
    assert namespace["loss"].shape == () and "sgd(" in str(namespace["train_step"].program)


def test_the_gpt_trains_the_same_with_function_and_in_todays_form():
    # bit for bit only at one BLAS thread count: the numpy engine's follows the cores the machine leaves free, and
    # a float32 product split among other threads rounds otherwise (executor.md, "Threads")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        with_function, _ = run("gpt-data", "gpt-model", "gpt-function")
        today, _ = run("gpt-data", "gpt-model", "gpt-today")
    assert falls(with_function["losses"])
    assert with_function["losses"] == today["losses"]
    assert len(with_function["sample"]) == 40 and set(with_function["sample"]) <= set(with_function["chars"])
    assert with_function["sample"] == today["sample"]


def test_the_pytorch_gpt_trains():
    try:
        import torch  # noqa: F401
    except ImportError:
        require("torch", "pip install -e '.[oracle]'")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # its two OpenMP threads and numpy's OpenBLAS ones fight in one process: 17 s, not 1
    try:
        namespace, _ = run("gpt-data", "gpt-torch")
    finally:
        torch.set_num_threads(threads)
    assert falls(namespace["losses"]) and len(namespace["sample"]) == 40


def hessian_times_ones(x: np.ndarray) -> np.ndarray:
    """The Hessian of sum(tanh(x)^2) is diagonal, 2 (1 - t^2)(1 - 3 t^2) with t = tanh(x)."""
    t = np.tanh(x)
    return 2 * (1 - t ** 2) * (1 - 3 * t ** 2)


def printed_numbers(text: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"-?\d+\.\d+(?:e[+-]?\d+)?", text)])


@pytest.mark.parametrize("tag", ["hvp-function", "hvp-today"])
def test_the_hessian_vector_products_are_right(tag):
    _, printed = run(tag)
    np.testing.assert_allclose(printed_numbers(printed), hessian_times_ones(np.ones(3)), rtol=1e-7)


def test_the_jax_hessian_vector_product_agrees():
    try:
        import jax  # noqa: F401
    except ImportError:
        require("jax", "pip install -e '.[xla]'")
    _, printed = run("hvp-jax")
    np.testing.assert_allclose(printed_numbers(printed), hessian_times_ones(np.ones(3)), rtol=1e-5)


def readme_mlp_lines() -> tuple[int, int]:
    """Lines of the README's MLP in today's form (its first Python block) and with ``gradgen.framework.function``."""
    bodies = [body for lang, body in FENCE.findall((ROOT / "README.md").read_text()) if lang == "python"]
    with_function = [body for body in bodies if "@function" in body]
    assert len(with_function) == 1
    return lines(bodies[0]), lines(with_function[0])


def test_the_line_count_table_matches_the_blocks():
    text = DOC.read_text()
    gpt = [lines(BLOCKS["gpt-model"]) + lines(BLOCKS["gpt-function"]),
           lines(BLOCKS["gpt-model"]) + lines(BLOCKS["gpt-today"]), lines(BLOCKS["gpt-torch"])]
    hvp = [lines(BLOCKS[t]) for t in ("hvp-function", "hvp-today", "hvp-jax")]
    today, with_function = readme_mlp_lines()
    rows = [f"| the README's MLP (training, printing the program) | {with_function} | {today} | - |",
            f"| tiny GPT (model, Adam training, generation) | {gpt[0]} | {gpt[1]} | {gpt[2]} (PyTorch) |",
            f"| Hessian-vector product | {hvp[0]} | {hvp[1]} | {hvp[2]} (JAX) |"]
    for row in rows:
        assert row in text, f"design_docs/function.md's table is stale; it should have the row\n{row}"
    assert gpt[0] < gpt[2] and hvp[2] == 7  # what the doc's prose says of them
