"""The op table in design_docs/backward.md is the one the makers' ``emits`` generate."""
from pathlib import Path

import pytest

from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
from gradgen.grad_makers.table import BEGIN, END, main, markdown_table, with_table

DOC = Path(__file__).resolve().parents[2] / "design_docs" / "backward.md"


def test_backward_md_holds_the_generated_op_table():
    doc = DOC.read_text(encoding="utf-8")
    assert with_table(doc) == doc, "stale: run python -m gradgen.grad_makers.table --write design_docs/backward.md"


def test_the_table_has_a_row_for_every_maker_and_lists_what_each_emits():
    table = markdown_table()
    for op_type, maker in GRAD_MAKERS.items():
        row = next(line for line in table.splitlines() if f"`{op_type}`" in line.split("|")[1])
        assert row.split("|")[3].strip() == ", ".join(f"`{t}`" for t in maker.emits)
    assert all(f"`{t}`" in table.splitlines()[-1] for t in NON_DIFFERENTIABLE)


def test_with_table_replaces_only_the_text_between_the_markers():
    doc = f"before\n{BEGIN}\nold rows\n{END}\nafter\n"
    assert with_table(doc) == f"before\n{BEGIN}\n{markdown_table()}\n{END}\nafter\n"
    with pytest.raises(ValueError, match="no op table"):
        with_table("a doc without markers")


def test_write_updates_a_stale_doc(tmp_path, capsys):
    path = tmp_path / "doc.md"
    path.write_text(f"{BEGIN}\nstale\n{END}\n", encoding="utf-8")
    assert main(["--write", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == f"{BEGIN}\n{markdown_table()}\n{END}\n"
    main(["--write", str(path)])
    assert "already current" in capsys.readouterr().out
