"""``gradgen dot``: one picture per program, labels escaped once, legend, mirrored backward, no write-back edges."""
import shutil
import subprocess

import pytest

from gradgen.program.dot import program_to_dot
from gradgen.program.errors import ProgramError

from tests.extras import require

from .programs import second_order_program, shared_use_program, trained_example

try:
    import graphviz  # noqa: F401  (the dot extra)
except ImportError:
    require("the graphviz package", "pip install -e .[dot]", module_level=True)


def test_labels_break_lines_instead_of_showing_backslash_n():
    text = program_to_dot(trained_example("mlp"))
    assert "\\\\n" not in text  # the old writer escaped the line break twice
    assert "cluster_legend" in text and "forward op" in text and "backward op" in text


def test_updates_write_a_separate_node_and_grad_ops_share_their_forward_rank():
    text = program_to_dot(trained_example("mlp"))
    assert text.count("(updated)") == 2  # w1 and w2: no edge back up to the parameter's node
    assert text.count("rank=same") >= 5


def test_sub_blocks_are_clusters_of_the_one_picture():
    program = trained_example("rnn")
    text = program_to_dot(program)
    for b in range(1, len(program.blocks)):
        assert f"subgraph cluster_b{b} " in text


@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_graphviz_renders_every_example(name, tmp_path):
    require(None if shutil.which("dot") else "Graphviz's dot", "apt-get install graphviz")
    text = program_to_dot(trained_example(name))
    result = subprocess.run(["dot", "-Tsvg"], input=text.encode(), capture_output=True, timeout=60)
    assert result.returncode == 0 and b"<svg" in result.stdout
    assert b"Warning" not in result.stderr, result.stderr[:500]


def test_optimizer_state_and_unread_outputs_fold_into_labels():
    program = trained_example("rnn")
    text = program_to_dot(program)
    assert "w_xh@moment1" not in text
    assert "(+ 5 state vars)" in text  # adam: two moments, two powers, the learning rate
    assert "outputs nothing reads" in text and "while_0@GRAD@history@4" not in text
    assert "relu_0" in text  # a body result is read by its loop, through the op's attrs


def test_the_gradients_a_program_computes_are_drawn_not_folded_as_unread():
    first = program_to_dot(shared_use_program())  # append_backward without an optimizer: w@GRAD is only fetched
    assert 'label="w@GRAD\n' in first and "nothing reads" not in first
    second = program_to_dot(second_order_program())  # the second gradient of x is x@GRAD@1
    assert 'label="x@GRAD@1\n' in second and 'label="x@GRAD\n' in second
    assert 'label="reduce_sum_0@GRAD@GRAD@RENAME@0' not in second  # a partial nothing adds up stays folded


def test_labels_count_in_the_singular_and_plural():
    text = program_to_dot(second_order_program())
    assert "(+ 1 output nothing reads)" in text and "1 outputs" not in text
    assert "(+ 8 outputs nothing reads)" in program_to_dot(trained_example("rnn"))


def test_a_long_chain_of_grad_ops_is_not_pinned_into_one_row():
    # softmax_with_cross_entropy's gradient is eight grad ops; pinned beside their forward op, they made
    # the CNN example's picture a row 4866 px wide. Only the last grad op of each forward op mirrors it.
    text = program_to_dot(trained_example("cnn"))
    rows = [chunk.split("}")[0] for chunk in text.split("rank=same")[1:]]
    assert rows and all(row.count("_op") == 2 for row in rows), rows


@pytest.mark.parametrize("rankdir", ["TB", "LR"])
def test_rank_direction_is_a_choice(rankdir):
    assert f"rankdir={rankdir}" in program_to_dot(trained_example("mlp"), rankdir=rankdir)


def test_an_unknown_rank_direction_is_refused():
    with pytest.raises(ProgramError, match="rankdir must be one of TB, LR, got 'BT'"):
        program_to_dot(trained_example("mlp"), rankdir="BT")
