"""The shape of what the backward pass generates: exact op lists, provenance, registry coverage, errors."""
import importlib
import pkgutil

import pytest

from gradgen import grad_makers

from gradgen.framework import BackwardError, append_backward, gradients
from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
from gradgen.program import OP_SCHEMAS, Program, layers, program_guard


def _mlp():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 20], "float64")
        y = layers.data("y", [-1, 3], "float64")
        w1 = layers.create_parameter([20, 8], "float64", name="w1")
        w2 = layers.create_parameter([8, 3], "float64", name="w2")
        loss = layers.reduce_sum(layers.square(layers.relu(x @ w1) @ w2 - y))
        params_grads = append_backward(loss)
    return main, params_grads


def test_small_mlp_generates_exactly_these_ops():
    main, params_grads = _mlp()
    backward = [(op.type, op.output_arg_names, op.forward_op.type if op.forward_op else None)
                for op in main.global_block().ops if op.role == "backward"]
    assert backward == [
        ("fill_any_like", ["reduce_sum_0@GRAD"], None),
        ("broadcast_to", ["square_0@GRAD"], "reduce_sum"),
        ("scale", ["square_0@GRAD@scale"], "square"),
        ("elementwise_mul", ["elementwise_sub_0@GRAD"], "square"),
        # matmul_1 and y are both [-1, 3]: y may be fed with one row, so the gradient is summed back to
        # matmul_1's run-time shape (a no-op when the batch sizes match)
        ("reduce_as", ["matmul_1@GRAD"], "elementwise_sub"),
        ("matmul", ["relu_0@GRAD"], "matmul"),
        ("matmul", ["w2@GRAD"], "matmul"),
        ("relu_grad", ["matmul_0@GRAD"], "relu"),
        ("matmul", ["w1@GRAD"], "matmul"),
    ]
    assert [(p.name, g.name, g.shape) for p, g in params_grads] == [("w1", "w1@GRAD", (20, 8)),
                                                                    ("w2", "w2@GRAD", (8, 3))]


def test_printed_program_names_the_forward_op_of_each_grad_op():
    main, _ = _mlp()
    text = str(main)
    assert "w1@GRAD: float64[20, 8] = matmul(X=x, Y=matmul_0@GRAD, transpose_x=True)  <- grad of #0 matmul" in text
    assert "backward:" in text


def test_every_op_type_is_differentiable_or_declared_not():
    """Makers can only emit registered op types, so this also covers every op a maker emits."""
    missing = sorted(set(OP_SCHEMAS) - set(GRAD_MAKERS) - NON_DIFFERENTIABLE)
    assert missing == [], f"op types with neither a grad maker nor a non-differentiable declaration: {missing}"
    assert not set(GRAD_MAKERS) & NON_DIFFERENTIABLE
    assert set(GRAD_MAKERS) <= set(OP_SCHEMAS), sorted(set(GRAD_MAKERS) - set(OP_SCHEMAS))


def test_every_grad_makers_module_lists_its_public_names_makers_and_tangent_rules_in_all():
    for info in pkgutil.iter_modules(grad_makers.__path__):
        module = importlib.import_module(f"gradgen.grad_makers.{info.name}")
        assert isinstance(getattr(module, "__all__", None), list), f"{info.name} has no __all__"
        assert all(hasattr(module, name) for name in module.__all__), info.name
        tagged = {name for name, value in vars(module).items()
                  if getattr(value, "grad_of", None) or getattr(value, "tangent_of", None)}
        assert tagged <= set(module.__all__), f"{info.name}: rules not in __all__: {tagged - set(module.__all__)}"


def test_an_op_without_a_maker_on_the_path_is_a_clear_error(monkeypatch):
    monkeypatch.delitem(GRAD_MAKERS, "tanh")
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        loss = layers.reduce_sum(layers.tanh(x))
        with pytest.raises(BackwardError, match=r"block 0, op #0 \(tanh\) has no grad maker.*'x'.*stop_gradient"):
            gradients(loss, [x])

