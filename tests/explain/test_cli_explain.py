"""``gradgen explain`` and the rough edges of the commands around it."""
import subprocess
import sys

GRADGEN = [sys.executable, "-m", "gradgen.framework"]


def gradgen(*args):
    return subprocess.run(GRADGEN + [str(a) for a in args], capture_output=True, text=True, timeout=120)


def _program(tmp_path):
    from .programs import trained_example

    path = tmp_path / "mlp.json"
    trained_example("mlp").save(path)
    return path


def test_explain_writes_a_page_sized_from_the_feed_shapes(tmp_path):
    program = _program(tmp_path)
    result = gradgen("explain", program, "--feed-shape", "x=64,1000", "-o", tmp_path / "page.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '"feed_shapes":{"x":[64,1000]' in page


def test_unknown_feed_shape_names_are_errors(tmp_path):
    program = _program(tmp_path)
    for command in ("explain", "summary"):
        extra = ["-o", tmp_path / "p.html"] if command == "explain" else []
        result = gradgen(command, program, "--feed-shape", "nope=3,4", *extra)
        assert result.returncode == 1 and "--feed-shape var 'nope' is not a var" in result.stderr


def test_run_with_no_steps_is_an_error(tmp_path):
    result = gradgen("run", _program(tmp_path), "--fetch", "loss", "--steps", "0")
    assert result.returncode == 1 and "--steps must be at least 1" in result.stderr


def test_progress_bar_stays_out_of_logs(tmp_path):
    result = gradgen("example", "mlp", "--steps", "30", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr  # stderr is a pipe here, not a terminal


def test_the_page_says_which_backend_runs_the_program(tmp_path):
    program = _program(tmp_path)
    for backend, said in (("numpy", "runs on the numpy backend. Click"), ("xla", "runs on the xla backend (its compiler")):
        assert gradgen("explain", program, "--backend", backend, "-o", tmp_path / f"{backend}.html").returncode == 0
        page = (tmp_path / f"{backend}.html").read_text(encoding="utf-8")
        assert said in page.replace("&mdash;", "-"), backend
        assert '"backend":"' + backend + '"' in page


def test_the_help_and_the_doc_say_how_to_take_a_headless_screenshot_as_root():
    """Issue 34: Chromium run as root refuses to start without --no-sandbox, which the docs did not say."""
    from pathlib import Path

    command = ("chromium --headless --no-sandbox --window-size=1600,1200 --screenshot=page.png "
               "file://$PWD/page.html")
    result = gradgen("explain", "--help")
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())  # argparse wraps the epilog
    assert command in flat and "as root Chromium will not start without --no-sandbox" in flat, result.stdout
    doc = (Path(__file__).resolve().parents[2] / "design_docs" / "explain.md").read_text()
    section = doc.split("### A screenshot without a display", 1)[1].split("###", 1)[0]
    assert command in section and "Running as root without --no-sandbox is not supported" in section
