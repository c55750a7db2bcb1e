"""The builder makers record with: naming, writing results, dropping unneeded ops, refusing undeclared ops."""
import pytest

from gradgen.framework import BackwardError, gradients
from gradgen.grad_makers import GRAD_MAKERS, Builder, Ref, RuleError, grad_maker
from gradgen.grad_makers.families import from_input, unary
from gradgen.program import Program, layers, program_guard


def _fresh():
    count = {}

    def fresh(label):
        count[label] = count.get(label, 0) + 1
        return f"t@{label}@{count[label]}"

    return fresh


def _summary(descs):
    return [(d.type, d.inputs, d.outputs, d.attrs) for d in descs]


def test_a_result_is_written_by_the_op_that_makes_it_and_temporaries_are_named_in_program_order():
    g = Builder()
    dx = g.mul("dout", g.neg(g.cos("x")))
    assert isinstance(dx, Ref) and dx.name is None
    descs = g.finish([("x@GRAD", dx)], _fresh())
    assert _summary(descs) == [
        ("cos", {"X": ["x"]}, {"Out": ["t@cos@1"]}, {}),
        ("scale", {"X": ["t@cos@1"]}, {"Out": ["t@scale@1"]}, {"scale": -1.0, "bias": 0.0}),
        ("elementwise_mul", {"X": ["dout"], "Y": ["t@scale@1"]}, {"Out": ["x@GRAD"]}, {}),
    ]


def test_ops_that_only_unwanted_results_need_are_dropped():
    g = Builder()
    shared = g.square("x")
    dx, dy = g.mul("dout", shared), g.div(g.exp("y"), shared)
    descs = g.finish([("x@GRAD", dx)], _fresh())
    assert [d.type for d in descs] == ["square", "elementwise_mul"]
    assert dy.name is None, "a dropped value gets no name"
    assert Builder().finish([], _fresh()) == []


def test_an_existing_var_or_a_value_taken_twice_is_copied_by_an_assign():
    g = Builder(frozenset({"assign", "elementwise_mul"}))
    both = g.mul("a", "b")
    descs = g.finish([("a@GRAD", "dout"), ("b@GRAD", both), ("c@GRAD", both)], _fresh())
    assert _summary(descs) == [
        ("elementwise_mul", {"X": ["a"], "Y": ["b"]}, {"Out": ["b@GRAD"]}, {}),
        ("assign", {"X": ["dout"]}, {"Out": ["a@GRAD"]}, {}),
        ("assign", {"X": ["b@GRAD"]}, {"Out": ["c@GRAD"]}, {}),
    ]


def test_multi_output_ops_and_writing_into_a_given_name():
    g = Builder()
    pieces = g.split("d", axis=1, sections=[2, 3])
    picked = g.gather("h", "i", into="param")
    assert picked == "param"
    descs = g.finish([("a@GRAD", pieces[1])], _fresh())
    assert _summary(descs) == [
        ("split", {"X": ["d"]}, {"Out": ["t@out@1", "a@GRAD"]}, {"axis": 1, "sections": [2, 3]}),
        ("gather", {"X": ["h"], "Index": ["i"]}, {"Out": ["param"]}, {"axis": 0}),  # writes a given name: kept
    ]


def test_recording_an_op_type_the_rule_did_not_declare_is_a_rule_error():
    g = Builder(frozenset({"elementwise_mul"}))
    with pytest.raises(RuleError, match=r"records a 'cos' op, which its emits \['elementwise_mul'\] do not list"):
        g.mul("dout", g.cos("x"))
    with pytest.raises(RuleError, match="needs an 'assign'"):
        Builder(frozenset({"elementwise_mul"})).finish([("x@GRAD", "dout")], _fresh())


def test_family_helpers_check_rule_parameter_names_against_the_schemas():
    with pytest.raises(TypeError, match="rule parameter 'factr' is neither 'op' nor an attr of 'pow'"):
        from_input("pow", emits=("pow",), slope=lambda g, x, factr: g.pow(x, factr))
    maker = from_input("pow", emits=("pow", "scale", "elementwise_mul"),
                       slope=lambda g, x, factor: g.scale(g.pow(x, factor - 1.0), factor))
    assert maker.grad_of == ("pow",) and maker.slope_of == "X"


def _tanh_loss():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        loss = layers.reduce_sum(layers.tanh(x))
    return main, x, loss


@pytest.mark.parametrize("maker, message", [
    (unary("tanh", emits=("tanh_grad",), rule=lambda g, x, out, dout: g.cos(x)),
     r"block 0, op #0 \(tanh\), grad maker 'maker': the rule records a 'cos' op"),
    (grad_maker("tanh", emits=())(lambda g, op: {"Y": op.grad("Out")}),
     r"op #0 \(tanh\).*gradient for input slot 'Y', which the op does not have"),
    (grad_maker("tanh", emits=("assign",))(lambda g, op: {"X": [op.grad("Out")] * 2}),
     r"op #0 \(tanh\).*2 gradient\(s\) for input slot 'X', which holds 1 var"),
    (grad_maker("tanh", emits=())(lambda g, op: {"X": g.op("cos", {"X": op.input("Bias")})}),
     r"op #0 \(tanh\).*reads input slot 'Bias', which holds no var"),
])
def test_a_broken_maker_is_a_backward_error_naming_the_op(monkeypatch, maker, message):
    monkeypatch.setitem(GRAD_MAKERS, "tanh", maker)
    main, x, loss = _tanh_loss()
    with pytest.raises(BackwardError, match=message):
        gradients(loss, [x])


def test_a_maker_giving_no_gradient_leaves_the_input_without_one(monkeypatch):
    monkeypatch.setitem(GRAD_MAKERS, "tanh", grad_maker("tanh", emits=())(lambda g, op: {"X": None}))
    main, x, loss = _tanh_loss()
    assert gradients(loss, [x]) == [None]
