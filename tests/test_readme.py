"""README.md runs as shown: its Python blocks, in order, and its ``$ gradgen ...`` sessions, whose printed output
must match what the commands print now (issue 24: the README showed a grad var name the code had renamed).

A session is a fenced block without a language whose first line starts with ``$ ``. Expected lines match
the printed ones exactly after trailing spaces are dropped and measured times (``797 us``, ``1.25 ms``,
``9.36 s``, with the padding that aligns them) become ``<time>``; a line ``...`` (indented or not) stands
for any number of printed lines. The programs the README's ``gradgen modes`` sessions read are made by
``design_docs/forward_mode.md``'s own script, which this test runs too. ``sh`` blocks (install, tests,
MPI) show commands only and are not run.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from gradgen.framework.tools.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
TIME = re.compile(r" *\b\d[\d.,]*(?:e[+-]?\d+)?\s*(?:ns|us|ms|s)\b")  # with the padding that right-aligns it
SKIP = "..."


def fenced_blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block of a Markdown file, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(path.read_text())]


def sessions(body: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` for each ``$ `` line of a session block."""
    out: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


def normalized(line: str) -> str:
    return TIME.sub(" <time>", line.rstrip())


def matches(expected: list[str], printed: list[str]) -> bool:
    """Whether printed lines match expected ones, each ``...`` standing for any run of lines (also none)."""
    if not expected:
        return not printed
    if expected[0].strip() == SKIP:
        return any(matches(expected[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and normalized(expected[0]) == normalized(printed[0]) and matches(expected[1:], printed[1:])


def run_command(command: str) -> list[str]:
    """Run one shown ``gradgen ...`` command in this process; its stdout lines."""
    argv = shlex.split(command)
    assert argv[0] == "gradgen", f"a README session runs gradgen only: {command}"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli(argv[1:])
    assert code == 0, f"`{command}` exited with {code}:\n{printed.getvalue()}"
    return printed.getvalue().splitlines()


def forward_mode_script() -> str:
    """The Python script ``design_docs/forward_mode.md`` runs to write mlp.json, curve.json and square.json."""
    for lang, body in fenced_blocks(ROOT / "design_docs" / "forward_mode.md"):
        script = re.search(r"^python - <<'PY'\n(.*?)^PY$", body, re.S | re.M)
        if lang == "sh" and script:
            return script.group(1)
    raise AssertionError("design_docs/forward_mode.md no longer has its `python - <<'PY'` script")


def test_matching_skips_runs_of_lines_and_ignores_times_but_nothing_else():
    assert matches(["a", SKIP, "d"], ["a", "b", "c", "d"])
    assert matches(["a", SKIP, "b"], ["a", "b"])
    assert matches(["took 797 us"], ["took 1.25 ms"])
    assert matches(["|    797 us |"], ["|   77.4 s |"])
    assert matches(["|    797 us |"], ["| 1.26e+04 s |"])  # a loaded machine's forward-mode Jacobian
    assert not matches(["a", SKIP, "d"], ["a", "b", "c", "e"])
    assert not matches(["square_0@GRAD@two_x"], ["square_0@GRAD@scale"])
    assert not matches(["a"], ["a", "b"])


def test_readme_code_and_sessions_run_as_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(forward_mode_script(), "design_docs/forward_mode.md", "exec"), {"__name__": "__readme__"})
    namespace: dict = {"__name__": "__readme__"}
    ran = {"python": 0, "session": 0}
    for k, (lang, body) in enumerate(fenced_blocks(ROOT / "README.md")):
        if lang == "python":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(body, f"README.md block {k}", "exec"), namespace)
            ran["python"] += 1
        elif lang == "" and body.startswith("$ "):
            for command, expected in sessions(body):
                printed = run_command(command)
                assert matches(expected, printed), (
                    f"README.md block {k}: `{command}` printed\n" + "\n".join(printed) +
                    "\n\nbut the README shows\n" + "\n".join(expected))
            ran["session"] += 1
        else:  # an unchecked block may show commands (install, tests, MPI), never their output
            assert lang == "sh", f"README.md block {k} shows output but is no `$ ` session this test checks"
    assert ran == {"python": 5, "session": 4}  # every block this test is meant to check was found

