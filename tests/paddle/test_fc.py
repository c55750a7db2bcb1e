"""``fc`` spelled the Paddle way (input=, param_attr=, bias_attr=, num_flatten_dims=) and ``data`` with None dims."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, append_backward, gradients
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.program import Program, ProgramError, layers, program_guard
from gradgen.program.initializer import Constant, Normal
from gradgen.program.param_attr import ParamAttr


def _build(fn, **shapes):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        vs = {n: layers.data(n, s, "float64") for n, s in shapes.items()}
        out = fn(**vs)
    scope = Scope()
    Executor().run(startup, scope=scope)
    return main, scope, out


def _params(program):
    return [p.name for p in program.all_parameters()]


def test_default_names_count_fc_layers_as_paddle_does():
    main, _, _ = _build(lambda x: layers.fc(input=layers.fc(x, 3, act="relu"), size=2), x=[None, 4])
    assert _params(main) == ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]


def test_named_layers_keep_gradgen_names():
    main, _, _ = _build(lambda x: layers.fc(x, 3, name="h"), x=[None, 4])
    assert _params(main) == ["h.w", "h.b"]


def test_param_attr_names_initializes_and_freezes():
    def net(x):
        return layers.fc(input=x, size=2, param_attr=ParamAttr(name="w", initializer=Constant(0.5), trainable=False),
                         bias_attr=ParamAttr(name="b", initializer=Constant(1.5)))
    main, scope, out = _build(net, x=[None, 3])
    assert _params(main) == ["w", "b"]
    np.testing.assert_array_equal(scope["w"], np.full((3, 2), 0.5))
    np.testing.assert_array_equal(scope["b"], np.full(2, 1.5))
    with program_guard(main, Program()):
        loss = layers.mean(out)
        assert [p.name for p, _ in append_backward(loss)] == ["b"]  # w is frozen


@pytest.mark.parametrize("param_attr,bias_attr,names", [
    ("weights", False, ["weights"]),
    (Normal(0.0, 0.01), None, ["fc_0.w_0", "fc_0.b_0"]),
    (None, "bias", ["fc_0.w_0", "bias"]),
])
def test_paddles_other_spellings_of_attrs(param_attr, bias_attr, names):
    main, _, _ = _build(lambda x: layers.fc(input=x, size=2, param_attr=param_attr, bias_attr=bias_attr), x=[None, 3])
    assert _params(main) == names


def test_an_image_given_as_input_is_flattened_from_axis_1():
    main, scope, out = _build(lambda img: layers.fc(input=img, size=5, act="tanh"), img=[None, 1, 4, 4])
    assert out.shape == (-1, 5) and main.global_block().var("fc_0.w_0").shape == (16, 5)
    img = np.random.default_rng(0).standard_normal((3, 1, 4, 4))
    (got,) = Executor().run(main, feed={"img": img}, fetch_list=[out], scope=scope)
    np.testing.assert_allclose(got, np.tanh(img.reshape(3, 16) @ scope["fc_0.w_0"] + scope["fc_0.b_0"]), rtol=1e-12)


@pytest.mark.parametrize("call,out_shape,w_shape", [
    (lambda x: layers.fc(x, 5), (2, 3, 5), (4, 5)),                                  # gradgen: the last axis
    (lambda x: layers.fc(input=x, size=5), (2, 5), (12, 5)),                         # Paddle: flatten from 1
    (lambda x: layers.fc(input=x, size=5, num_flatten_dims=2), (2, 3, 5), (4, 5)),
    (lambda x: layers.fc(x, 5, num_flatten_dims=1), (2, 5), (12, 5)),
])
def test_rank_3_inputs(call, out_shape, w_shape):
    main, scope, out = _build(call, x=[2, 3, 4])
    assert out.shape == out_shape and main.global_block().var("fc_0.w_0").shape == w_shape
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    (got,) = Executor().run(main, feed={"x": x}, fetch_list=[out], scope=scope)
    k = len(out_shape) - 1
    expected = x.reshape(x.shape[:k] + (-1,)) @ scope["fc_0.w_0"] + scope["fc_0.b_0"]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_list_of_inputs_gets_one_weight_each_and_one_bias():
    main, scope, out = _build(lambda a, b: layers.fc(input=[a, b], size=2), a=[None, 3], b=[None, 1, 2])
    assert _params(main) == ["fc_0.w_0", "fc_0.w_1", "fc_0.b_0"]
    a, b = np.ones((2, 3)), np.full((2, 1, 2), 2.0)
    (got,) = Executor().run(main, feed={"a": a, "b": b}, fetch_list=[out], scope=scope)
    expected = a @ scope["fc_0.w_0"] + b.reshape(2, 2) @ scope["fc_0.w_1"] + scope["fc_0.b_0"]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_gradients_through_a_flattened_fc_match_finite_differences():
    main, scope, out = _build(lambda img: layers.fc(input=img, size=3, act="tanh"), img=[2, 2, 3])
    with program_guard(main, Program()):
        loss = layers.reduce_sum(layers.square(out))
        grads = gradients(loss, [main.global_block().var("img"), main.global_block().var("fc_0.w_0")])
    feed = {"img": np.random.default_rng(2).standard_normal((2, 2, 3))}
    analytic = Executor().run(main, feed=feed, fetch_list=grads, scope=scope)
    for wrt, got in zip(("img", "fc_0.w_0"), analytic):
        np.testing.assert_allclose(got, numeric_gradient(main, feed, scope, loss.name, wrt), rtol=1e-6, atol=1e-8)


def test_data_takes_none_for_unknown_dims():
    with program_guard(Program(), Program()):
        assert layers.data("x", [None, 13], "float32").shape == (-1, 13)
        assert layers.data("s", [], "int64").shape == ()
        with pytest.raises(ProgramError, match="invalid shape"):
            layers.data("bad", [None, "a"], "float32")


@pytest.mark.parametrize("call,message", [
    (lambda x: layers.fc(x, 2, input=x), "takes its input once"),
    (lambda x: layers.fc(input=x), "positive size"),
    (lambda x: layers.fc(input=x, size=2, param_attr=False), "would leave no weight"),
    (lambda x: layers.fc(input=[x, x], size=2, param_attr="w"), "cannot share the weight name 'w'"),
    (lambda x: layers.fc(input=[x, x], size=2, param_attr=["a"]), "1 param_attrs for 2 inputs"),
    (lambda x: layers.fc(input=x, size=2, param_attr=3), "param_attr must be a ParamAttr"),
    (lambda x: layers.fc(input=x, size=2, param_attr=ParamAttr(learning_rate=2.0)), "not supported"),
    (lambda x: layers.fc(input=x, size=2, num_flatten_dims=3), r"num_flatten_dims must be in \[1, 2\]"),
    (lambda x: layers.fc(input=layers.data("u", [2, -1, 3], "float64"), size=2), "from axis 1 on known"),
])
def test_errors(call, message):
    with program_guard(Program(), Program()):
        x = layers.data("x", [None, 2, 3], "float64")
        with pytest.raises(ProgramError, match=message):
            call(x)


def test_embedding_and_layer_norm_take_paddle_names_and_spellings():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        ids = layers.data("ids", [None, 3], "int64")
        e = layers.embedding(input=ids, size=[7, 4], dtype="float64",
                             param_attr=ParamAttr(name="table", initializer=Constant(0.25)))
        layers.embedding(ids, [7, 2], "float64")
        layers.layer_norm(e)
        layers.layer_norm(e, name="ln")
    # every call counts, as in Paddle: the second table is embedding_1 although the first was named by its attr
    assert _params(main) == ["table", "embedding_1.w_0", "layer_norm_0.w_0", "layer_norm_0.b_0", "ln.scale", "ln.bias"]
    scope = Scope()
    Executor().run(startup, scope=scope)
    (got,) = Executor().run(main, feed={"ids": np.array([[0, 6, 2]])}, fetch_list=[e], scope=scope)
    np.testing.assert_array_equal(got, np.full((1, 3, 4), 0.25))
    with program_guard(Program(), Program()):
        with pytest.raises(ProgramError, match="takes its ids once"):
            layers.embedding(size=[2, 2])
        with pytest.raises(ProgramError, match=r"size=\[vocabulary, width\]"):
            layers.embedding(layers.data("i", [2], "int64"), size=[3])
