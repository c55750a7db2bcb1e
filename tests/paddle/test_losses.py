"""The Paddle loss helpers and accuracy: values against numpy, gradients (first and second order) against FD."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import Program, ProgramError, layers, program_guard

from ..grad.checking import check_op_gradients


def _run(build, **arrays):
    main = Program()
    with program_guard(main, Program()):
        vs = [layers.data(n, [None if i == 0 else d for i, d in enumerate(a.shape)], str(a.dtype))
              for n, a in arrays.items()]
        out = build(*vs)
    (got,) = Executor(check_types=True).run(main, feed=arrays, fetch_list=[out], scope=Scope())
    return got


def _huber(r, delta):
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


SHAPES = [((5,), (5,)), ((4, 3), (4, 3)), ((4, 3), (4, 1)), ((2, 3, 2), (2, 3, 2)), ((0, 3), (0, 3))]
ELEMENTWISE = {
    "square_error_cost": (lambda x, y: layers.square_error_cost(input=x, label=y), lambda x, y: (x - y) ** 2),
    "mse_loss": (lambda x, y: layers.mse_loss(x, y, reduction="none"), lambda x, y: (x - y) ** 2),
    "l1_loss": (lambda x, y: layers.l1_loss(x, y, reduction="none"), lambda x, y: np.abs(x - y)),
    "huber_loss": (lambda x, y: layers.huber_loss(x, y, delta=0.7), lambda x, y: _huber(y - x, 0.7)),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("x_shape,y_shape", SHAPES)
def test_elementwise_losses_match_numpy(name, x_shape, y_shape):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    build, reference = ELEMENTWISE[name]
    got = _run(build, x=x, y=y)
    assert got.shape == np.broadcast_shapes(x_shape, y_shape)
    np.testing.assert_allclose(got, reference(x, y), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("reduction,reference", [("mean", np.mean), ("sum", np.sum)])
def test_reductions(reduction, reference):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    got = _run(lambda a, b: layers.mse_loss(a, b, reduction=reduction), x=x, y=y)
    assert got.shape == ()
    np.testing.assert_allclose(got, reference((x - y) ** 2), rtol=1e-12)
    np.testing.assert_allclose(_run(lambda a, b: layers.l1_loss(a, b, reduction=reduction), x=x, y=y),
                               reference(np.abs(x - y)), rtol=1e-12)


def test_huber_at_ties_and_zero_is_continuous():
    delta = 0.5
    r = np.array([-delta, -1e-300, 0.0, delta, 2.0])
    got = _run(lambda a, b: layers.huber_loss(a, b, delta=delta), x=np.zeros(5), y=r)
    np.testing.assert_allclose(got, [0.125, 0.0, 0.0, 0.125, 0.875], rtol=1e-15, atol=1e-300)


@pytest.mark.parametrize("loss, name", [(lambda x, y: layers.square_error_cost(input=x, label=y), "square_error_cost"),
                                        (layers.mse_loss, "mse_loss"), (layers.l1_loss, "l1_loss"),
                                        (layers.huber_loss, "huber_loss"), (layers.smooth_l1, "smooth_l1")])
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("float64", "int32"), ("bool", "float32")])
def test_integer_inputs_are_a_clear_error(loss, name, dtypes):
    """square and abs take ints since issue 11 A, so the loss itself refuses them, as Paddle's does."""
    with program_guard(Program(), Program()):
        x, y = layers.data("x", [2], dtypes[0]), layers.data("y", [2], dtypes[1])
        bad = next(v for v in (x, y) if not v.dtype.startswith("float"))
        message = rf"{name}: \w+ '{bad.name}' is {bad.dtype}\[2\], but a loss needs float"
        with pytest.raises(ProgramError, match=message):
            loss(x, y)


@pytest.mark.parametrize("shape", [(4, 3), (4, 1), (3, 2, 2), (0, 2), (3,)])
@pytest.mark.parametrize("sigma", [1.0, 2.0])
def test_smooth_l1_sums_each_row(shape, sigma):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(shape) * 2, rng.standard_normal(shape)
    got = _run(lambda a, b: layers.smooth_l1(a, b, sigma=sigma), x=x, y=y)
    per = _huber(x - y, 1 / sigma**2) * sigma**2
    expected = per.sum(axis=tuple(range(1, len(shape)))).reshape(-1, 1)
    assert got.shape == (shape[0], 1)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_smooth_l1_weights():
    rng = np.random.default_rng(3)
    x, y, wi, wo = (rng.standard_normal((3, 2)) for _ in range(4))
    got = _run(lambda a, b, i, o: layers.smooth_l1(a, b, inside_weight=i, outside_weight=o), x=x, y=y, i=wi, o=wo)
    np.testing.assert_allclose(got, (_huber(wi * (x - y), 1.0) * wo).sum(axis=1, keepdims=True), rtol=1e-12)


def test_log_loss():
    rng = np.random.default_rng(4)
    p, label = rng.uniform(0.05, 0.95, (5, 1)), rng.integers(0, 2, (5, 1)).astype(np.float64)
    got = _run(lambda a, b: layers.log_loss(a, b, epsilon=1e-4), p=p, label=label)
    np.testing.assert_allclose(got, -label * np.log(p + 1e-4) - (1 - label) * np.log(1 - p + 1e-4), rtol=1e-12)


@pytest.mark.parametrize("label_shape,label_dtype", [((6, 1), np.int64), ((6,), np.int64), ((6, 1), np.int32)])
def test_accuracy_counts_top1_hits_and_breaks_ties_to_the_first(label_shape, label_dtype):
    scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.5, 0.5], [0.5, 0.5], [0.3, 0.7], [0.6, 0.4]])
    label = np.array([1, 0, 0, 1, 0, 1]).astype(label_dtype).reshape(label_shape)
    got = _run(lambda s, lab: layers.accuracy(input=s, label=lab), s=scores, label=label)
    assert got.shape == () and got.dtype == np.float64
    assert got == pytest.approx(3 / 6)  # rows 0, 1 and 2 (a tie goes to class 0)


def test_bad_arguments_are_errors():
    with program_guard(Program(), Program()):
        x = layers.data("x", [2], "float64")
        with pytest.raises(ProgramError, match="reduction must be one of mean, sum, none"):
            layers.mse_loss(x, x, reduction="avg")
        with pytest.raises(ProgramError, match="delta must be positive"):
            layers.huber_loss(x, x, delta=0.0)
        with pytest.raises(ProgramError, match="k=5 must be between 0 and the size 2"):
            layers.accuracy(x, x, k=5)  # top-k of 2 classes
        with pytest.raises(ProgramError, match="label must be a Variable"):
            layers.square_error_cost(x, 1.0)


# -- gradients: every helper is a composition of differentiable ops, checked through end to end -----------------

GRADIENT_CASES = {
    "square_error_cost": lambda x, y: layers.square_error_cost(input=x, label=y),
    "mse_loss": lambda x, y: layers.mse_loss(x, y),
    "mse_loss_sum": lambda x, y: layers.mse_loss(x, y, reduction="sum"),
    "l1_loss": lambda x, y: layers.l1_loss(x, y),
    "huber_loss": lambda x, y: layers.huber_loss(x, y, delta=0.8),
    "smooth_l1": lambda x, y: layers.smooth_l1(x, y, sigma=1.5),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
@pytest.mark.parametrize("x_shape,y_shape", [((4, 3), (4, 3)), ((4, 3), (4, 1)), ((3, 2, 2), (3, 2, 2))])
def test_gradients(name, x_shape, y_shape):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(x_shape) * 2, rng.standard_normal(y_shape)  # residuals away from the kinks
    check_op_gradients(GRADIENT_CASES[name], {"x": x, "y": y})


def test_log_loss_gradients():
    rng = np.random.default_rng(6)
    check_op_gradients(lambda p, y: layers.log_loss(p, y),
                       {"p": rng.uniform(0.1, 0.9, (4, 1)), "y": rng.uniform(0.0, 1.0, (4, 1))})


def test_smooth_l1_weight_gradients():
    rng = np.random.default_rng(7)
    check_op_gradients(lambda x, y, i, o: layers.smooth_l1(x, y, inside_weight=i, outside_weight=o),
                       {n: rng.standard_normal((3, 2)) * 2 for n in ("x", "y", "i", "o")})
