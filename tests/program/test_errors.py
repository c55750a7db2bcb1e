"""Ops that do not match their schema are refused where they are built, with everything named."""
import pytest

from gradgen.program import OpError, Program


def _block():
    main = Program()
    block = main.global_block()
    block.create_var("x", [2, 3], "float64")
    return block


@pytest.mark.parametrize("call,message", [
    (lambda b: b.append_op("relus", {"X": "x"}, {"Out": ["o"]}), r"block 0, op #0 \(relus\).*unknown op type 'relus'; "
                                                                 r"did you mean 'relu'\?"),
    (lambda b: b.append_op("relu", {}, {"Out": ["o"]}), r"block 0, op #0 \(relu\).*missing input slot 'X'"),
    (lambda b: b.append_op("relu", {"X": "x", "Y": "x"}, {"Out": ["o"]}), "unknown input slot 'Y'"),
    (lambda b: b.append_op("relu", {"X": ["x", "x"]}, {"Out": ["o"]}), "input slot 'X' takes one var, got 2"),
    (lambda b: b.append_op("scale", {"X": "x"}, {"Out": ["o"]}, {"scael": 2.0}),
     "unknown attr 'scael'; did you mean 'scale'"),
    (lambda b: b.append_op("scale", {"X": "x"}, {"Out": ["o"]}, {"scale": "big"}),
     "attr 'scale' must be of kind scalar, got 'big'"),
    (lambda b: b.append_op("transpose", {"X": "x"}, {"Out": ["o"]}), "missing required attr 'perm'"),
    (lambda b: b.append_op("relu", {"X": "ghost"}, {"Out": ["o"]}), "input X=ghost is not defined in block 0"),
    (lambda b: b.append_op("matmul", {"X": "x", "Y": "x"}, {"Out": ["o"]}),
     r"inner dimensions differ: 3 vs 2 \(inputs: X=x: float64\[2, 3\], Y=x: float64\[2, 3\]\)"),
])
def test_schema_violations(call, message):
    with pytest.raises(OpError, match=message):
        call(_block())


def test_an_output_declared_with_another_type_is_refused():
    block = _block()
    block.create_var("o", [5], "float64")
    with pytest.raises(OpError, match=r"output Out=o is declared float64\[5\] but the op makes float64\[2, 3\]"):
        block.append_op("relu", {"X": "x"}, {"Out": ["o"]})
