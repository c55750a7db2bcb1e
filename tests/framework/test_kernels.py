"""Every op: a kernel exists, it agrees with numpy, it keeps the dtype and shape promise, and a kernel that takes
``out`` computes exactly the same values with or without a buffer, writes only into one that fits, and never touches
its inputs."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy import blas
from gradgen.framework.backend.numpy.kernels import KERNELS, takes_out, with_out
from tests.framework.op_cases import ALL_CASES
from tests.framework.op_harness import Case, check_type_promise, one_op_program, run_case
from gradgen.program import OP_SCHEMAS
from gradgen.program import ops as program_ops

KERNEL_FAMILIES = ("creation", "elementwise", "activation", "linalg", "reduction", "manipulation", "logic", "nn")
"""Schema families whose kernels live in this package's family modules (grad and optimizer ops are tested by theirs)."""


def test_every_schema_has_a_kernel():
    missing = sorted(t for t in OP_SCHEMAS if t not in KERNELS)
    assert not missing, f"op types without a kernel: {missing}"


def test_every_kernel_has_a_schema():
    stray = sorted(t for t in KERNELS if t not in OP_SCHEMAS)
    assert not stray, f"kernels for unknown op types: {stray}"


def test_every_op_of_the_kernel_families_has_float32_and_float64_cases():
    covered: dict[str, set] = {}
    for case in ALL_CASES:
        dtypes = {str(np.asarray(v if not isinstance(v, list) else v[0]).dtype) for v in case.inputs.values()}
        dtypes |= {case.attrs["dtype"]} if "dtype" in case.attrs else set()
        covered.setdefault(case.op, set()).update(dtypes)
    families = [f for f in program_ops.FAMILIES if f.__name__.rsplit(".", 1)[-1] in KERNEL_FAMILIES]
    assert len(families) == len(KERNEL_FAMILIES)
    for family in families:
        for s in family.SCHEMAS:
            assert s.type in covered, f"no kernel test case for op '{s.type}'"
            takes_floats = any("float32" in rule for rule in s.dtypes.values() if not isinstance(rule, str))
            wanted = {"float32", "float64"} if takes_floats else {"bool"}  # logical ops take bools only
            assert wanted <= covered[s.type], f"op '{s.type}' is tested only on {covered[s.type]}"


def _close(got, want, dtype):
    want = np.asarray(want)
    if got.dtype.kind in "biu" or want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
    elif got.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_op_matches_numpy_and_keeps_its_type_promise(case):
    got, declared = run_case(case)
    check_type_promise(got, declared, case.op)
    want = case.expect({k: (v if not isinstance(v, list) else list(v)) for k, v in case.inputs.items()})
    if not isinstance(want, dict):
        want = {"Out": [want]}
    assert set(want) == set(got), f"{case.op}: outputs {sorted(got)}, expected {sorted(want)}"
    for slot, arrays in want.items():
        assert len(arrays) == len(got[slot])
        for g, w in zip(got[slot], arrays):
            assert g.shape == np.shape(w), f"{case.op} {slot}: shape {g.shape}, numpy gives {np.shape(w)}"
            _close(g, w, g.dtype)


# -- the optional output buffer ---------------------------------------------------------------------------------

_rng = np.random.default_rng(0)


def _randn(dtype, shape=(5, 3)):
    return _rng.standard_normal(shape).astype(dtype)


UPDATE_SHAPES = ((5, 3), (7,), ())
SGD_CASES = [Case("sgd", {"Param": _randn(d, s), "Grad": _randn(d, s), "LearningRate": np.asarray([0.1], d)}, None)
             for d in ("float32", "float64") for s in UPDATE_SHAPES]
MOMENTUM_CASES = [Case("momentum", {"Param": _randn(d, s), "Grad": _randn(d, s), "Velocity": _randn(d, s),
                                     "LearningRate": np.asarray([0.1], d)}, None, attrs={"mu": 0.9, "use_nesterov": n},
                       label=f"nesterov={n}")
                  for d in ("float32", "float64") for n in (False, True) for s in UPDATE_SHAPES]
ADAM_CASES = [Case(op, {"Param": _randn(d, s), "Grad": _randn(d, s), "LearningRate": np.asarray([0.1], d),
                            "Moment1": _randn(d, s), "Moment2": _rng.random(s).astype(d),
                            "Beta1Pow": np.asarray([0.9], d), "Beta2Pow": np.asarray([0.999], d)}, None,
                   attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, **extra}, label=op)
              for op, extra in (("adam", {}), ("adamw", {"coeff": 0.3})) for d in ("float32", "float64")
              for s in UPDATE_SHAPES]
MORE_CASES = [Case("scale", {"X": _randn(d)}, None, {"scale": s, "bias": b}, label=f"{s}x+{b}")
              for d in ("float32", "float64") for s, b in ((1.0, 0.0), (3.0, 0.0), (1.0, 2.0))]
_INTS = np.arange(12, dtype=np.int64).reshape(3, 4)
EDGE_CASES = [  # zero-size and size-1 dims, and int arrays (whose results a float buffer never fits)
    Case("matmul", {"X": _randn("float64", (3, 0)), "Y": _randn("float64", (0, 4))}, None, label="k=0"),
    Case("matmul", {"X": _randn("float64", (0, 3)), "Y": _randn("float64", (3, 1))}, None, label="m=0"),
    Case("matmul", {"X": _randn("float64", (0, 2, 3)), "Y": _randn("float64", (3, 4))}, None, label="folded, batch 0"),
    Case("matmul", {"X": _randn("float64", (2, 0, 3, 4)), "Y": _randn("float64", (1, 4, 2))}, None,
         label="batched, batch 0"),
    Case("matmul", {"X": _randn("float64", (2, 3, 4)), "Y": _randn("float64", (4,))}, None, label="1-D y"),
    Case("sum", {"X": [_randn("float64", (0, 2)) for _ in range(3)]}, None),
    Case("sgd", {"Param": _randn("float64", (0, 3)), "Grad": _randn("float64", (0, 3)),
                 "LearningRate": np.asarray([0.1])}, None),
    Case("tanh", {"X": _randn("float32", (0, 3))}, None),
    Case("tanh_grad", {"Out": _randn("float64", (1, 1)), "Out@GRAD": _randn("float64", (1, 1))}, None),
    Case("elementwise_add", {"X": _INTS, "Y": _INTS + 1}, None, label="int64"),
    Case("elementwise_div", {"X": _INTS, "Y": _INTS + 1}, None, label="int64"),
    Case("scale", {"X": _INTS}, None, {"scale": 2.0, "bias": 1.0}, label="int64")]
CASES = ALL_CASES + SGD_CASES + MORE_CASES + EDGE_CASES
MULTI_CASES = MOMENTUM_CASES + ADAM_CASES


def _kernel(case):
    """The case's op's kernel function, and its input arrays flat in the kernel's argument order."""
    _, op, feed = one_op_program(case)
    return KERNELS[op.type](op), [feed[n] for n in op.input_arg_names], op


BUFFERED = [c for c in CASES if takes_out(_kernel(c)[0])]
UNBUFFERED = [c for c in CASES if not takes_out(_kernel(c)[0])]


def test_a_bare_ufunc_gets_a_buffer_only_when_it_is_like_every_input():
    """A ufunc would broadcast into a bigger buffer: ``with_out`` (what the plan calls with a buffer) stops that."""
    add = with_out(np.add)
    x, y, big = np.ones(3), np.ones(3), np.zeros((2, 3))
    assert add(x, y, out=big) is not big and (big == 0).all()
    assert add(x, np.ones((2, 3)), out=big) is not big and (big == 0).all()  # broadcasting: allocates
    assert add(x, y, out=np.zeros(3, np.float32)).dtype == np.float64  # another dtype: allocates
    buf = np.zeros(3)
    assert add(x, y, out=buf) is buf and (buf == 2).all()
    ints = np.ones(3, np.int64)
    quotient = with_out(np.divide)(ints, ints, out=np.zeros(3, np.int64))  # int / int is a float: allocates
    assert quotient.dtype == np.float64
    relu = KERNELS["relu"](None)
    assert with_out(relu) is relu  # a Python kernel checks the fit itself


def test_the_kernels_that_take_out_are_the_ones_expected():
    """The big-array kernels take a buffer; a factory declines it only for attrs or ranks where it cannot help."""
    assert {c.op for c in BUFFERED + MULTI_CASES} == {
        "relu", "tanh", "exp", "log", "sqrt", "square", "abs", "sin", "cos", "reciprocal", "sign", "scale", "erf",
        "relu_grad", "tanh_grad", "sigmoid_grad", "softmax_grad", "elementwise_add", "elementwise_sub", "elementwise_mul",
        "elementwise_div", "elementwise_pow", "elementwise_max", "elementwise_min", "matmul", "sum", "sgd",
        "momentum", "adam", "adamw", "conv2d_transpose", "pool2d"}
    declined = {(c.op, c.label or str(len(c.inputs.get("X", [])))) for c in UNBUFFERED if c.op in ("scale", "sum")}
    # The identities return their input, and integer scale computes in its own dtype: no buffer.
    assert declined == {("scale", "1.0x+0.0"), ("scale", "int64"), ("sum", "1")}
    # A product writes into a buffer when its operands are matrices: 2-D, folded into 2-D (x[..., k] @ y[k, n]),
    # or batches of them on a provider with a batched GEMM; a 1-D operand's product allocates.
    batched_gemm = blas.PROVIDER is not None and blas.PROVIDER.name != "numpy" and blas.PROVIDER.gemm_batch
    for c in CASES:
        if c.op == "matmul":
            rx, ry = np.ndim(c.inputs["X"]), np.ndim(c.inputs["Y"])
            matrices = rx == ry == 2 or (rx > 2 and ry == 2 and not c.attrs.get("transpose_x"))
            assert any(c is b for b in BUFFERED) == (rx >= 2 and ry >= 2 and (matrices or bool(batched_gemm))), c.id
    assert any(c.op == "matmul" for c in UNBUFFERED)


@pytest.mark.parametrize("case", BUFFERED, ids=lambda c: c.id)
def test_a_kernel_computes_the_same_with_a_buffer_and_writes_only_one_that_fits(case):
    fn, args, op = _kernel(case)
    fn = with_out(fn)
    before = [a.copy() for a in args]
    want = np.asarray(fn(*args))
    np.testing.assert_array_equal(fn(*args, out=None), want, strict=True)
    buf = np.full(want.shape, 7, want.dtype)
    got = fn(*args, out=buf)
    np.testing.assert_array_equal(np.asarray(got), want, strict=True)
    if got is not buf:  # declined at run time (broadcasting, mixed shapes): then the buffer is left alone
        assert (buf == 7).all()
    # The cases the buffers are for must use them: same-type arrays without broadcasting, or a 2-D product.
    arrays = args[:2] if op.type == "sgd" else args  # not sgd's learning rate
    same_type = all(a.shape == want.shape and a.dtype == want.dtype for a in arrays)
    assert got is buf or not (same_type and want.ndim or op.type == "matmul")
    wrong = np.full(want.shape + (2,), 7, want.dtype)
    np.testing.assert_array_equal(np.asarray(fn(*args, out=wrong)), want, strict=True)
    assert (wrong == 7).all()  # a buffer that does not fit is left alone
    other = np.full(want.shape, 7, np.float32 if want.dtype == np.float64 else np.float64)
    np.testing.assert_array_equal(np.asarray(fn(*args, out=other)), want, strict=True)
    assert (other == 7).all()  # nor one of another dtype
    if all(a.dtype.kind in "iu" for a in arrays):  # a buffer like the int inputs: used only for an int result
        like_inputs = np.full(want.shape, 7, arrays[0].dtype)
        got = fn(*args, out=like_inputs)
        np.testing.assert_array_equal(np.asarray(got), want, strict=True)
        assert got is like_inputs or (like_inputs == 7).all()
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", MULTI_CASES, ids=lambda c: c.id)
def test_a_multi_output_update_writes_each_output_into_its_buffer(case):
    fn, args, _ = _kernel(case)
    fn = with_out(fn)
    before = [a.copy() for a in args]
    want = fn(*args)
    partial = (np.empty_like(want[0]),) + (None,) * (len(want) - 1)
    for got in (fn(*args, out=(None,) * len(want)), fn(*args, out=partial)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, strict=True)
    bufs = tuple(np.full_like(w, 7) for w in want)
    got = fn(*args, out=bufs)
    assert all(g is b for g, b in zip(got, bufs)) or np.ndim(args[0]) == 0  # 0-d Adam: the rates broadcast
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, strict=True)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape,dtype,value", [([], "int64", 1), ([2, 3], "float32", 0.1), ([0, 4], "float64", 2.0),
                                               ([9, 9], "float16", -1.5), ([3], "bool", 1.0)])
def test_fill_constant_gives_a_fresh_array_of_np_full_every_run(shape, dtype, value):
    """Small constants are copies of one array made with the kernel (a loop makes them every iteration): each
    run's array is its own, equal to ``np.full`` bit for bit, in the declared dtype."""
    from gradgen.program import Program, layers, program_guard
    main = Program()
    with program_guard(main, Program()):
        layers.fill_constant(shape, dtype, value)
    kernel = KERNELS["fill_constant"](main.global_block().ops[-1])
    first, second = kernel(), kernel()
    want = np.full(shape, value, dtype=dtype)
    assert first is not second and first.dtype == want.dtype and first.shape == want.shape
    np.testing.assert_array_equal(first, want)
    first[...] = 0  # a later op writing into one run's constant leaves the next run's alone
    np.testing.assert_array_equal(kernel(), want)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("index", [np.int64(1), np.int32(-1), np.array(0), np.array(-2, np.int32), np.array(3),
                                   np.array(-5), np.array([2, 0, 2])], ids=repr)
def test_gather_of_one_integer_index_is_np_take_with_its_bounds(axis, index):
    """One integer index reads a view of the row (the fast path of a loop body's gather); it must give np.take's
    values, shape and dtype, and fail where np.take fails, with its message."""
    from gradgen.framework import ExecutionError, Executor, Scope
    from gradgen.program import Program, layers, program_guard

    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 3, 4], "float32")
        i = layers.data("i", list(np.shape(index)), str(index.dtype))
        out = layers.gather(x, i, axis=axis)
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    try:
        want = np.take(xv, index, axis=axis)
    except IndexError as e:
        with pytest.raises(ExecutionError, match=str(e)):
            Executor().run(main, feed={"x": xv, "i": index}, fetch_list=[out], scope=Scope())
        return
    (got,) = Executor().run(main, feed={"x": xv, "i": index}, fetch_list=[out], scope=Scope())
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
