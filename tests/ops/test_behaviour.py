"""Issue 14's ops beyond their gradients: ties, zeros, -1 dims, bad input, saving, and `gradgen ops`."""
import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest

from gradgen.framework import BackwardError, ExecutionError, Executor, Scope, gradients
from gradgen.framework.tools.cli import main as cli_main
from gradgen.framework.tools.gradcheck import numeric_gradient
from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
from gradgen.program import OP_SCHEMAS, Program, layers, program_guard
from gradgen.program.errors import OpError, ProgramError

NEW_OPS = ("pad", "cumsum", "logsumexp", "erf", "elu", "elu_grad", "silu", "reduce_prod", "argmin", "top_k", "scatter",
           "scatter_add", "take_along_axis", "take_along_axis_grad", "conv2d_transpose", "prod_others",
           "tril", "triu", "flatten", "einsum", "sort", "argsort")


def _run(build, feed, fetch_grads_of=(), batch=False):
    """Build with data vars named like ``feed`` (dim 0 unknown if ``batch``); returns the program, the outputs and
    the gradients of the first output's sum weighted by a fed ``r``."""
    main = Program()
    with program_guard(main, Program()):
        xs = {n: layers.data(n, [-1] * batch + list(a.shape[batch:]), str(a.dtype)) for n, a in feed.items()}
        outs = build(**xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        grads = []
        if fetch_grads_of:
            r = layers.data("r", list(outs[0].shape), outs[0].dtype)
            grads = gradients(layers.reduce_sum(outs[0] * r), [xs[n] for n in fetch_grads_of])
    return main, outs, grads


def test_top_k_takes_the_lower_index_on_ties_and_its_gradient_goes_there():
    x = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 1.0, 1.0, 5.0, 1.0]])
    main, (values, indices), (dx,) = _run(lambda x: layers.top_k(x, 2), {"x": x}, ["x"])
    r = np.array([[10.0, 20.0], [30.0, 40.0]])
    v, i, g = Executor().run(main, feed={"x": x, "r": r}, fetch_list=[values, indices, dx])
    np.testing.assert_array_equal(i, [[1, 2], [3, 0]])
    np.testing.assert_array_equal(v, [[3.0, 3.0], [5.0, 2.0]])
    np.testing.assert_array_equal(g, [[0, 10, 20, 0, 0], [40, 0, 0, 30, 0]])
    main, (values, indices) = _run(lambda x: layers.top_k(x, 3, largest=False), {"x": x})[:2]
    (i,) = Executor().run(main, feed={"x": x}, fetch_list=[indices])
    np.testing.assert_array_equal(i, [[3, 0, 1], [1, 2, 4]])


def test_argmin_takes_the_first_index_on_ties_and_has_no_gradient():
    x = np.array([[1, 0, 0], [4, 4, 4]], dtype=np.int64)
    main, (k,), _ = _run(lambda x: layers.argmin(x, axis=1, keep_dim=True), {"x": x})
    (got,) = Executor().run(main, feed={"x": x}, fetch_list=[k])
    np.testing.assert_array_equal(got, [[1], [0]])
    assert k.dtype == "int64" and k.stop_gradient and "argmin" in NON_DIFFERENTIABLE


def test_reduce_prod_gradient_with_a_run_time_batch_dim():
    main, (out,), (dx,) = _run(lambda x: layers.reduce_prod(x, dim=1), {"x": np.zeros((1, 4))}, ["x"], batch=True)
    exe = Executor()
    for x in (np.array([[0.0, 2.0, 3.0, 0.5], [0.0, 2.0, 0.0, 1.0]]), np.arange(12.0).reshape(3, 4) - 4.0):
        r = np.arange(1.0, 1.0 + len(x))
        got, = exe.run(main, feed={"x": x, "r": r}, fetch_list=[dx])
        want = np.array([[r[b] * np.prod(np.delete(row, j)) for j in range(4)] for b, row in enumerate(x)])
        np.testing.assert_array_equal(got, want)


def test_reduce_prod_over_a_run_time_dim_first_order_works_second_order_is_a_clear_backward_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 3], "float64")
        y = layers.reduce_sum(layers.reduce_prod(x, dim=0))
        (dx,) = gradients(y, [x])
        feed = {"x": np.array([[0.0, 2.0, 3.0], [0.0, 0.5, 0.0], [4.0, 1.5, 2.0]])}
        (got,) = Executor().run(main, feed=feed, fetch_list=[dx])
        want = [[np.prod(np.delete(col, i)) for col in feed["x"].T] for i in range(3)]
        np.testing.assert_array_equal(got, want)
        with pytest.raises(BackwardError, match=r"\(prod_others\).*reduce_prod's second order.*reduced dims \[0\] at "
                                                r"compile time"):
            gradients(layers.reduce_sum(dx), [x])


def test_a_repeated_scatter_index_is_an_error_at_run_time():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3, 2], "float64")
        i = layers.data("i", [2], "int64")
        out = layers.scatter(x, i, layers.data("u", [2, 2], "float64"))
    with pytest.raises(ExecutionError, match="scatter.*more than once.*scatter_add"):
        Executor().run(main, feed={"x": np.zeros((3, 2)), "i": np.array([1, -2]), "u": np.ones((2, 2))},
                       fetch_list=[out])


BAD = [
    (lambda x: layers.top_k(x, 5), "top_k.*k=5 must be between 0 and the size 4"),
    (lambda x: layers.pad(x, [1, 1]), "pad.*paddings \\[1, 1\\] must be 2 x rank = 4"),
    (lambda x: layers.pad(x, [1, 1, -1, 0]), "non-negative"),
    (lambda x: layers.slice(x, [0], [0], [2], [0]), "slice.*strides \\[0\\] must be non-zero"),
    (lambda x: layers.cumsum(x, axis=2), "cumsum.*axis 2 is out of range"),
    (lambda x: layers.cumsum(x > 0), "cumsum.*X must be float16, float32, float64, int32 or int64, got bool"),
    (lambda x: layers.cumsum(layers.reduce_sum(x)), "cumsum needs X of rank >= 1, got float64\\[\\]"),
    (lambda x: layers.pad(layers.cast(x, "int64"), [1, 1, 0, 0], 0.5), "pad.*pad_value 0.5 is not a whole number"),
    (lambda x: layers.matmul(x, layers.reduce_sum(x)), "matmul.*rank >= 1"),
    (lambda x: layers.matmul(layers.reduce_sum(x, dim=0), x), "inner dimensions differ: 4 vs 3"),
    (lambda x: layers.logsumexp(layers.cast(x, "int64")), "logsumexp.*float"),
    (lambda x: layers.scatter(x, layers.fill_constant([2], "int64", 0), x), "Updates must be float64\\[2, 4\\]"),
    (lambda x: layers.take_along_axis(x, layers.fill_constant([3], "int64", 0), 1), "Index \\[3\\] must have X's rank"),
    (lambda x: layers.pool2d(layers.reshape(x, [1, 1, 3, 4]), 2, padding=[0, 0, 0]),
     "padding \\(or four: top, bottom, left, right\\) must be an int or a pair"),
    (lambda x: layers.pool2d(layers.reshape(x, [1, 1, 3, 4]), 2, padding=[0, 2, 0, 0]), "smaller than ksize"),
    (lambda x: layers.conv2d_transpose(layers.reshape(x, [1, 1, 3, 4]), 2, 3, stride=2, output_padding=2),
     "output_padding \\[2, 2\\] must be two ints, each at least 0 and below its stride"),
    # issue 23's ops
    (lambda x: layers.einsum("ii->i", layers.reshape(x, [2, 6])), "einsum.*repeats i.*traces and diagonals"),
    (lambda x: layers.einsum("ij,jk->ik", x, x), "einsum.*index j has sizes 4 and 3"),
    (lambda x: layers.einsum("ij", x, x), "einsum.*1 operand terms for 2 operands"),
    (lambda x: layers.einsum("ijk", x), "einsum.*names 3 dims, operand 0 has rank 2"),
    (lambda x: layers.einsum("ij->k", x), "einsum.*names k, which no operand has"),
    (lambda x: layers.einsum("i.j", x), "einsum.*letters with at most one '...'"),
    (lambda x: layers.einsum("ij,ij", x, layers.cast(x, "float32")),
     "einsum.*operands must share one dtype, got \\[.float64., .float32.\\]"),
    (lambda x: layers.tril(layers.reduce_sum(x, dim=0)), "tril.*rank >= 2"),
    (lambda x: layers.flatten(x, 3), "flatten.*axis 3 is out of range"),
    (lambda x: layers.sort(x, axis=2), "sort.*axis 2 is out of range"),
    (lambda x: layers.argsort(layers.reduce_sum(x)), "argsort needs X of rank >= 1"),
]


@pytest.mark.parametrize("build,message", BAD, ids=lambda v: v if isinstance(v, str) else "")
def test_bad_input_is_a_clear_error_naming_the_op(build, message):
    with program_guard(Program(), Program()):
        x = layers.data("x", [3, 4], "float64")
        with pytest.raises(ProgramError, match=message):
            build(x)


def test_every_new_op_has_a_gradient_rule_or_none_and_shows_in_gradgen_ops():
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["ops"]) == 0
    rows = {line.split()[0]: line for line in out.getvalue().splitlines()[1:]}
    for op in NEW_OPS:
        assert op in OP_SCHEMAS and op in rows, op
        kind = "none (declared)" if op in NON_DIFFERENTIABLE else "differentiable"
        assert kind in rows[op] and (op in NON_DIFFERENTIABLE or op in GRAD_MAKERS)
    assert "MISSING" not in out.getvalue()


def test_programs_with_the_new_ops_save_and_load_and_old_ones_get_the_new_attrs_defaults():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, 4, 4], "float64")
        x = layers.slice(layers.slice(x, [3], [0], [4], [2]), [0], [0], [2])
        y = layers.pool2d(layers.pool2d(x, 2, "avg", padding=[1, 0, 0, 1], exclusive=False), 1)
        z = layers.top_k(layers.cumsum(layers.pad(y, [0, 0, 0, 0, 1, 1, 0, 0]), axis=2), 2, axis=2)[0]
        gradients(layers.reduce_sum(layers.logsumexp(z, dim=1)), [x])
    text = main.to_json()
    assert Program.from_json(text).to_json() == text
    old = json.loads(text)
    defaults = {"strides": [], "exclusive": True, "ceil_mode": False}
    dropped = 0
    for op in old["blocks"][0]["ops"]:  # as a program saved before strided slices and pooling modes existed
        for name, value in defaults.items():
            if op["type"] in ("slice", "slice_grad", "pool2d", "pool2d_grad") and op["attrs"].get(name) == value:
                del op["attrs"][name]
                dropped += 1
    assert dropped >= 4
    assert Program.from_json(json.dumps(old)).to_json() == text


def test_int_tensors_go_through_the_new_ops_keeping_their_dtype():
    x = np.array([[3, -1, 2], [0, 5, 5]], dtype=np.int32)
    main = Program()
    with program_guard(main, Program()):
        v = layers.data("x", [-1, 3], "int32")
        outs = [layers.reduce_prod(v, dim=1), layers.cumsum(v, axis=1, reverse=True), layers.pad(v, [0, 1, 1, 0], 7),
                layers.top_k(v, 2)[0], layers.scatter_add(v, layers.fill_constant([2], "int64", 1), v), v[:, ::-2]]
    got = Executor().run(main, feed={"x": x}, fetch_list=outs)
    want = [np.prod(x, axis=1), np.cumsum(x[:, ::-1], axis=1)[:, ::-1], np.pad(x, ((0, 1), (1, 0)), constant_values=7),
            -np.sort(-x, axis=1)[:, :2], x + np.array([[0, 0, 0], [3, 4, 7]])[[0, 1]].sum(0) * [[0], [1]], x[:, ::-2]]
    for var, g, w in zip(outs, got, want):
        assert g.dtype == np.int32 and var.dtype == "int32"
        np.testing.assert_array_equal(g, w)


RUN_TIME_BATCH = {
    "logsumexp": lambda x: layers.logsumexp(x, dim=[1, 2]),
    "cumsum": lambda x: layers.cumsum(x, axis=0, exclusive=True),
    "pad": lambda x: layers.pad(x, [1, 0, 0, 2, 1, 1]) ** 2.0,
    "top_k": lambda x: layers.top_k(x, 2, axis=1)[0],
    "reduce_prod": lambda x: layers.reduce_prod(x, dim=[1, 2]),
    "strided_slice": lambda x: x[::-2, 1:, ::2] ** 2.0,
    "matmul_vector": lambda x: layers.matmul(x, layers.reduce_sum(x, dim=[0, 1])),
    "scatter_add": lambda x: layers.scatter_add(x * x, layers.fill_constant([2], "int64", 1), x[:, 0:2], axis=1),
    "pool_ceil": lambda x: layers.pool2d(layers.unsqueeze(x, [1]), 2, "avg", 2, [0, 1, 1, 0], False, True),
    "conv2d_transpose": lambda x: layers.conv2d_transpose(layers.unsqueeze(x, [1]), 2, 2, stride=2, output_padding=1),
}


@pytest.mark.parametrize("name", sorted(RUN_TIME_BATCH))
def test_ops_with_a_run_time_batch_dim_give_finite_difference_gradients_for_each_batch_size(name):
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1, 3, 4], "float64")
        out = RUN_TIME_BATCH[name](x)
        assert out.shape[0] == -1
        loss = layers.reduce_sum(out * layers.sin(out))
        (dx,) = gradients(loss, [x])
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for batch in (1, 3):
        feed = {"x": np.random.default_rng(batch).permutation(batch * 12).reshape(batch, 3, 4) * 0.1 + 0.05}
        (got,) = exe.run(main, feed=feed, fetch_list=[dx], scope=scope)
        np.testing.assert_allclose(got, numeric_gradient(main, feed, scope, loss.name, "x"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["erf", "silu", "elu", "logsumexp"])
def test_float16_stays_float16(name):
    """scipy's erf has no float16 loop and would widen to float32: the kernel casts back."""
    x = np.linspace(-2, 2, 6).reshape(2, 3)
    main = Program()
    with program_guard(main, Program()):
        out = getattr(layers, name)(layers.data("x", [2, 3], "float16"))
    (got,) = Executor(check_types=True).run(main, feed={"x": x.astype(np.float16)}, fetch_list=[out])
    (want,) = Executor().run(_float64_twin(name), feed={"x": x}, fetch_list=["out"])
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def _float64_twin(name):
    main = Program()
    with program_guard(main, Program()):
        getattr(layers, name)(layers.data("x", [2, 3], "float64"), name="out")
    return main
