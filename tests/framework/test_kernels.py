"""Every op: a kernel exists, it agrees with numpy, it keeps the dtype and shape promise, it never touches its
inputs, and it keeps nothing between calls that a later call could change."""
from __future__ import annotations

import numpy as np
import pytest

from gradgen.framework.backend.numpy.kernels import KERNELS
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


def _other(a):
    """An input of the same shape and dtype with other values (integers, often indexes, only reordered)."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return np.ascontiguousarray(np.flip(a))
    return (a * 2 + 1).astype(a.dtype) if a.dtype.kind == "f" else a


def _copies(result):
    return [np.array(r, copy=True) for r in (result if isinstance(result, tuple) else (result,))]



@pytest.mark.parametrize("case", SGD_CASES + MULTI_CASES, ids=lambda c: c.id)
def test_an_update_keeps_its_type_promise(case):
    """Every output of an optimizer update has its var's declared dtype and shape: a rank-0 Param with [1] beta
    powers made adam's step [1] (the type promise was checked for ``ALL_CASES`` only)."""
    got, declared = run_case(case)
    check_type_promise(got, declared, case.op)

@pytest.mark.parametrize("case", CASES + MULTI_CASES, ids=lambda c: c.id)
def test_a_kernel_leaves_its_inputs_alone_and_keeps_nothing_between_calls(case):
    """The reference interpreter's kernels are plain functions: a result is never an array the kernel hands out
    again (a later call must not change it) and no input is written."""
    fn, args, _ = _kernel(case)
    before = [np.array(a, copy=True) for a in args]
    first = fn(*args)
    kept = _copies(first)
    with np.errstate(all="ignore"):
        fn(*[_other(a) for a in args])
    for got, want in zip(first if isinstance(first, tuple) else (first,), kept):
        np.testing.assert_array_equal(got, want, strict=True)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b, strict=True)


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
