"""One rule for every op: the schema declares the dtype, and the kernel computes exactly that."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gradgen.framework import ExecutionError, Executor, Scope
from gradgen.program import OP_SCHEMAS, Program, layers, program_guard
from gradgen.program.initializer import Constant
from gradgen.program.dtypes import DTYPES
from gradgen.program.errors import OpError


def _one(build, feeds: dict):
    """Build ``build(*vars)`` over data vars typed like ``feeds``; run it with type checks; (var, value)."""
    main = Program()
    with program_guard(main, Program()):
        xs = [layers.data(n, list(v.shape), v.dtype.name) for n, v in feeds.items()]
        out = build(*xs)
    (value,) = Executor(check_types=True).run(main, feed=feeds, fetch_list=[out], scope=Scope())
    return out, value


INTS = np.array([[1, 2, 4], [3, 5, 8]])
BOOLS = np.array([[True, False, True], [True, True, False]])


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
@pytest.mark.parametrize("layer", [layers.mean, layers.reduce_mean, lambda x: layers.reduce_mean(x, dim=[1])])
def test_a_mean_of_ints_or_bools_is_float64(layer, dtype):
    x = (BOOLS if dtype == "bool" else INTS).astype(dtype)
    out, value = _one(layer, {"x": x})
    assert out.dtype == "float64" and value.dtype == np.float64
    np.testing.assert_allclose(value, np.mean(x, axis=None if value.ndim == 0 else 1))


@pytest.mark.parametrize("dtype, want", [("int32", "int64"), ("bool", "int64"), ("int64", "int64"),
                                         ("float16", "float16"), ("float32", "float32")])
def test_a_sum_of_int32_or_bools_is_int64_and_floats_keep_their_dtype(dtype, want):
    x = (BOOLS if dtype == "bool" else INTS).astype(dtype)
    out, value = _one(lambda v: layers.reduce_sum(v, dim=[0]), {"x": x})
    assert out.dtype == want and value.dtype == np.dtype(want)
    np.testing.assert_array_equal(value, x.sum(axis=0))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_int_division_is_true_division_to_float64(dtype):
    x, y = INTS.astype(dtype), np.array([2, -3, 4], dtype=dtype)
    out, value = _one(layers.divide, {"x": x, "y": y})
    assert out.dtype == "float64" and value.dtype == np.float64
    np.testing.assert_array_equal(value, x / y)


@pytest.mark.parametrize("layer, op", [(lambda b: layers.divide(b, b), "elementwise_div"),
                                       (lambda b: layers.scale(b, 2.0), "scale"),
                                       (lambda b: layers.pow(b, b), "elementwise_pow"),
                                       (lambda b: layers.add(b, b), "elementwise_add"),
                                       (lambda b: layers.sum([b, b]), "sum")])
def test_bool_inputs_to_arithmetic_are_a_build_error(layer, op):
    main = Program()
    with program_guard(main, Program()):
        b = layers.data("b", [3], "bool")
        with pytest.raises(OpError, match=rf"\({op}\).*X must be float16, float32, float64, int32 or int64, got bool"):
            layer(b)


@pytest.mark.parametrize("value, dtype", [(2 ** 53 + 1, "int64"), (-(2 ** 63), "int64"), (2 ** 63 - 1, "int64"),
                                          (2 ** 31 - 1, "int32"), (1, "bool"), (0.5, "float64")])
def test_fill_constant_keeps_every_value_its_dtype_holds_exactly(value, dtype):
    out, got = _one(lambda: layers.fill_constant([2], dtype, value), {})
    assert got.dtype == np.dtype(dtype) and got.tolist() == [value, value]
    again = Program.from_json(out.block.program.to_json())  # the exact int survives the file format
    assert again.global_block().ops[0].attrs["value"] == value


@pytest.mark.parametrize("value, dtype, problem", [(2.5, "int64", "not a whole number"),
                                                   (2 ** 31, "int32", "outside the range of int32"),
                                                   (2 ** 63, "int64", "outside the range of int64"),
                                                   (2, "bool", "outside the range of bool"),
                                                   (float("inf"), "int32", "not a whole number"),
                                                   (10 ** 40, "float32", "beyond the largest finite float32")])
def test_fill_constant_refuses_a_value_its_dtype_would_change(value, dtype, problem):
    main = Program()
    with program_guard(main, Program()):
        with pytest.raises(OpError, match=rf"\(fill_constant\).*value .*{problem}"):
            layers.fill_constant([2], dtype, value)


@pytest.mark.parametrize("sections", [[-1, 0, 0, 3], [-1, -1], [3, -2], [1, 2], [0, 3, -1]])
def test_split_sections_that_do_not_fit_the_axis_are_a_build_error(sections):
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [2, 4], "float64")
        with pytest.raises(OpError, match=r"\(split\).*sections"):
            main.global_block().append_op("split", {"X": x}, {"Out": [f"o{k}" for k in range(len(sections))]},
                                          {"sections": sections, "axis": 0})


def test_split_with_a_rest_section_takes_what_the_others_leave():
    out, value = _one(lambda x: layers.split(x, [1, -1], axis=1)[1], {"x": np.arange(8.0).reshape(2, 4)})
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(value, np.arange(8.0).reshape(2, 4)[:, 1:])


@pytest.mark.parametrize("op, grad_shape", [("sgd", [-1]), ("sgd", [-1, 3]), ("momentum", [2, -1]),
                                            ("adam", [-1, -1])])
def test_an_optimizer_update_whose_grad_has_unknown_dims_is_a_build_error(op, grad_shape):
    main = Program()
    block = main.global_block()
    p = block.create_var("p", [2, 3], "float64", persistable=True)
    g = block.create_var("g", grad_shape, "float64")
    scalar = {n: block.create_var(n, [], "float64", persistable=True) for n in ("lr", "b1", "b2")}
    state = {n: block.create_var(n, [2, 3], "float64", persistable=True) for n in ("v", "m1", "m2")}
    ins = {"Param": p, "Grad": g, "LearningRate": scalar["lr"]}
    outs = {"ParamOut": p}
    if op == "momentum":
        ins["Velocity"], outs["VelocityOut"] = state["v"], state["v"]
    if op == "adam":
        ins.update(Moment1=state["m1"], Moment2=state["m2"], Beta1Pow=scalar["b1"], Beta2Pow=scalar["b2"])
        outs.update(Moment1Out=state["m1"], Moment2Out=state["m2"], Beta1PowOut=scalar["b1"],
                    Beta2PowOut=scalar["b2"])
    with pytest.raises(OpError, match=rf"\({op}\).*Grad is float64\[.*\] but Param is float64\[2, 3\]"):
        block.append_op(op, ins, outs)



@pytest.mark.parametrize("op", ["adam", "adamw", "lamb"])
@pytest.mark.parametrize("slot, shape", [("Beta1Pow", [2, 3]), ("Beta2Pow", [3]), ("LearningRate", [1, 1])])
def test_an_adam_scalar_of_more_than_one_value_is_a_build_error(op, slot, shape):
    """The learning rate and the beta powers are scalars ([] or [1], as Paddle keeps them): a beta power shaped like
    Param made the step per element, and one of another shape failed only at run time."""
    main = Program()
    block = main.global_block()
    state = {n: block.create_var(n, [2, 3], "float64", persistable=True) for n in ("p", "g", "m1", "m2")}
    scalars = {n: block.create_var(n, shape if n == slot else [1], "float64", persistable=True)
               for n in ("LearningRate", "Beta1Pow", "Beta2Pow")}
    ins = {"Param": state["p"], "Grad": state["g"], "Moment1": state["m1"], "Moment2": state["m2"], **scalars}
    outs = {"ParamOut": state["p"], "Moment1Out": state["m1"], "Moment2Out": state["m2"],
            "Beta1PowOut": scalars["Beta1Pow"], "Beta2PowOut": scalars["Beta2Pow"]}
    with pytest.raises(OpError, match=rf"\({op}\).*{slot} must be a scalar, got shape {re.escape(str(shape))}"):
        block.append_op(op, ins, outs)

def test_every_schema_states_the_dtypes_of_every_input_and_dtype_attr():
    """So the registry test can enumerate them, and building an op checks them before inference."""
    for op_type, schema in OP_SCHEMAS.items():
        keys = [s.name for s in schema.inputs] + [n for n, a in schema.attrs.items()
                                                  if a.kind in ("dtype", "optional_dtype")]
        assert sorted(schema.dtypes) == sorted(keys), op_type
        for key, rule in schema.dtypes.items():
            if isinstance(rule, str):
                assert rule in schema.tables.inputs and isinstance(schema.dtypes[rule], tuple), (op_type, key)
            else:
                assert rule and set(rule) <= set(DTYPES), (op_type, key)


def test_a_dtype_a_schema_does_not_accept_is_named_with_what_it_does():
    main = Program()
    with program_guard(main, Program()):
        t = layers.data("t", [3], "int64")
        with pytest.raises(OpError, match=r"op #0 \(tanh\).*X must be a float tensor, got int64 \(inputs: X=t: "):
            layers.tanh(t)
        f = layers.data("f", [3], "float32")
        with pytest.raises(OpError, match=r"\(gather\).*Index must be int32 or int64, got float32"):
            layers.gather(f, f)
        with pytest.raises(OpError, match=r"\(elementwise_add\).*dtypes differ: int64 vs float32 \(Y must have the "
                                          r"dtype of X"):
            layers.add(t, f)


def test_split_sections_that_do_not_fit_an_axis_known_only_at_run_time_are_a_run_time_error():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 2], "float64")
        first, rest = layers.split(x, [3, -1], axis=0)
    exe = Executor(check_types=False)  # the kernel itself refuses, not only the type check
    (got,) = exe.run(main, feed={"x": np.zeros((5, 2))}, fetch_list=[rest], scope=Scope())
    assert got.shape == (2, 2)
    with pytest.raises(ExecutionError, match=r"\(split\).*sections \[3, -1\] do not add up to size 2 of axis 0"):
        exe.run(main, feed={"x": np.zeros((2, 2))}, fetch_list=[first, rest], scope=Scope())


def test_a_constant_initializer_gives_an_int64_parameter_its_exact_value():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        layers.create_parameter([2], "int64", name="p", initializer=Constant(2 ** 53 + 1))
    scope = Scope()
    Executor().run(startup, scope=scope)
    assert scope["p"].tolist() == [2 ** 53 + 1] * 2


def _op_alone(op_type: str, inputs: dict[str, np.ndarray], attrs: dict, outputs: tuple[str, ...] = ("Out",)):
    """``op_type`` alone in block 0 over vars typed like ``inputs`` (each slot one var); the program and its op."""
    main = Program()
    block = main.global_block()
    for slot, value in inputs.items():
        block.create_var(slot.lower(), list(value.shape), value.dtype.name)
    op = block.append_op(op_type, {slot: [slot.lower()] for slot in inputs},
                         {slot: [f"out_{slot.lower()}"] for slot in outputs}, attrs)
    return main, op


@pytest.mark.parametrize("dtype, start", [("int64", 2 ** 53 + 1), ("int64", 2 ** 63 - 2), ("int32", 2 ** 31 - 2)])
def test_an_int_counter_advances_exactly(dtype, start):
    counter = np.array(start, dtype=dtype)
    main, _ = _op_alone("increment", {"X": counter}, {"step": 1.0})
    (got,) = Executor(check_types=True).run(main, feed={"x": counter}, fetch_list=["out_out"], scope=Scope())
    assert got.dtype == np.dtype(dtype) and int(got) == start + 1


@pytest.mark.parametrize("op_type, inputs, attrs, message", [
    ("increment", {"X": np.array(0)}, {"step": 0.5}, r"step 0\.5 is not a whole number.*int64 counter"),
    ("increment", {"X": np.array(0, "float16")}, {"step": 1e5}, r"step 100000\.0 is beyond the largest finite float16"),
    ("pad", {"X": np.zeros(2, "float16")}, {"paddings": [1, 0], "pad_value": 1e6}, r"pad_value .* float16"),
    ("piecewise_decay", {"Step": np.array(0.0)}, {"boundaries": [], "values": [1.0]},
     r"Step must be int32 or int64, got float64"),
    ("piecewise_decay", {"Step": np.array(0)}, {"boundaries": [], "values": [1.0], "dtype": "int64"},
     r"attr dtype must be a float tensor, got int64"),
    ("linear_lr_warmup", {"Step": np.array(0), "LearningRate": np.array(1)},
     {"warmup_steps": 2, "start_lr": 0.0, "end_lr": 1.0}, r"LearningRate must be a float tensor, got int64"),
    ("scatter_add", {"X": np.zeros(2, bool), "Index": np.zeros(1, "int64"), "Updates": np.zeros(1, bool)}, {},
     r"X must be float16, float32, float64, int32 or int64, got bool"),
    ("take_along_axis", {"X": np.zeros(2), "Index": np.zeros(1)}, {}, r"Index must be int32 or int64, got float64"),
    ("allreduce_start", {"X": np.zeros(2, bool)}, {}, r"X must be float16, float32, float64, int32 or int64, got bool"),
])
def test_the_ops_merged_since_issue_11_refuse_what_they_cannot_compute_exactly(op_type, inputs, attrs, message):
    with pytest.raises(OpError, match=rf"op #0 \({op_type}\).*{message}"):
        _op_alone(op_type, inputs, attrs)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_an_allreduce_of_ints_sums_and_does_not_average(dtype):
    """The average of int gradients is not an int: a build error, while the sum keeps its dtype exactly."""
    main = Program()
    block = main.global_block()
    block.create_var("g", [3], dtype)
    block.append_op("allreduce_start", {"X": ["g"]}, {"Out": ["buffer"]})
    with pytest.raises(OpError, match=rf"\(allreduce_wait\).*an average of {dtype} values is not an {dtype}"):
        block.append_op("allreduce_wait", {"Buffer": ["buffer"], "X": ["g"]}, {"Out": ["g"]}, {"average": True})
    block.append_op("allreduce_wait", {"Buffer": ["buffer"], "X": ["g"]}, {"Out": ["g"]}, {"average": False})
    g = np.array([2 ** 30, -1, 7], dtype=dtype)
    (got,) = Executor(check_types=True).run(main, feed={"g": g}, fetch_list=["g"], scope=Scope())
    assert got.dtype == np.dtype(dtype) and got.tolist() == g.tolist()  # a world of one: the sum is g
