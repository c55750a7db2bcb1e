"""Every change to a program bumps its version, so the executor's cached plans never go stale.

Passes edit through Block and Program methods; edits to ``op.attrs`` / ``op.inputs`` and to var flags are
seen too. Each test runs, edits, runs again and checks the new behaviour.
"""
import numpy as np
import pytest

from gradgen.framework import Executor, Scope
from gradgen.program import OpError, Program, ProgramError, Variable, layers, program_guard
from gradgen.program.layers.operators import OPERATORS, VariableOperators
from gradgen.program.passes import strip_for_test
from gradgen.program.subblocks import rename_outer_reads


def _scaled_program():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [3], "float64")
        y = layers.scale(x, scale=2.0)
    return main, x, y


def test_editing_an_attr_after_a_run_changes_the_next_run():
    main, x, y = _scaled_program()
    exe, feed = Executor(check_types=True), {"x": np.array([1.0, 2.0, 3.0])}
    (first,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    version = main.version
    main.global_block().ops[0].attrs["scale"] = 3.0
    assert main.version > version
    (second,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(first, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(second, [3.0, 6.0, 9.0])


@pytest.mark.parametrize("edit", ["setitem", "update", "replace"])
def test_every_way_of_editing_op_fields_bumps_the_version(edit):
    main, x, y = _scaled_program()
    op = main.global_block().ops[0]
    version = main.version
    if edit == "setitem":
        op.attrs["bias"] = 1.0
    elif edit == "update":
        op.attrs.update(bias=1.0)
    else:
        op.attrs = dict(op.attrs, bias=1.0)
    assert main.version > version and op.attrs["bias"] == 1.0
    (out,) = Executor(check_types=True).run(main, feed={"x": np.zeros(3)}, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])


def test_making_a_var_persistable_after_a_run_keeps_its_value_in_the_scope():
    main, x, y = _scaled_program()
    exe, scope, feed = Executor(check_types=True), Scope(), {"x": np.array([1.0, 2.0, 3.0])}
    exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert y.name not in scope
    version = main.version
    y.persistable = True
    assert main.version > version
    exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(scope[y.name], [2.0, 4.0, 6.0])


def test_var_flags_are_bools_and_name_shape_dtype_are_fixed():
    main, x, y = _scaled_program()
    version = main.version
    y.stop_gradient = y.stop_gradient  # no change, no new version
    assert main.version == version
    with pytest.raises(ProgramError, match=r"var 'x'.stop_gradient must be True or False, got 0"):
        x.stop_gradient = 0
    for field, value in (("shape", (4,)), ("dtype", "float32"), ("name", "z")):
        with pytest.raises(ProgramError, match=rf"var 'x' \(float64\[3\]\) has a fixed {field}; declare a new var"):
            setattr(x, field, value)
    assert x.shape == (3,) and x.dtype == "float64" and x.name == "x"


def test_strip_for_test_is_seen_by_a_cached_plan():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [1000], "float64")
        y = layers.dropout(x, 0.5)
    exe, feed = Executor(check_types=True), {"x": np.ones(1000)}
    (train,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    version = main.version
    strip_for_test(main)
    assert main.version > version and main.global_block().ops[0].attrs["is_test"] is True
    (test,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    assert (train == 0).any()
    assert not (test == 0).any()


def _cond_program():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [2], "float64")
        z = layers.data("z", [2], "float64")
        flag = layers.data("flag", [], "bool")
        out = layers.cond(flag, lambda: x * 2.0, lambda: x + 1.0)
    return main, out


def test_renaming_outer_reads_of_sub_blocks_is_seen_by_a_cached_plan():
    main, out = _cond_program()
    cond_op = main.global_block().ops[-1]
    exe = Executor(check_types=True)
    feed = {"x": np.array([1.0, 2.0]), "z": np.array([10.0, 20.0]), "flag": np.array(True)}
    (before,) = exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    version = main.version
    main.global_block().rename_inputs(cond_op, {"x": "z"})
    rename_outer_reads(main, [1, 2], {"x": "z"})
    assert main.version > version
    (after,) = exe.run(main, feed=feed, fetch_list=[out], scope=Scope())
    np.testing.assert_array_equal(before, [2.0, 4.0])
    np.testing.assert_array_equal(after, [20.0, 40.0])


def test_set_attr_checks_and_coerces_like_building_an_op():
    main, x, y = _scaled_program()
    block = main.global_block()
    op = block.ops[0]
    block.set_attr(op, "scale", np.float32(4.0))
    assert op.attrs["scale"] == 4.0 and type(op.attrs["scale"]) is float
    with pytest.raises(OpError, match=r"block 0, op #0 \(scale\).*unknown attr 'scael'"):
        block.set_attr(op, "scael", 1.0)
    with pytest.raises(OpError, match=r"block 0, op #0 \(scale\).*attr 'scale' must be of kind scalar"):
        block.set_attr(op, "scale", "big")
    other, _, _ = _scaled_program()
    with pytest.raises(ProgramError, match="is not an op of this block"):
        other.global_block().set_attr(op, "scale", 1.0)


def test_rename_inputs_and_remove_ops():
    main = Program()
    block = main.global_block()
    for name in ("a", "b"):
        block.create_var(name, [2], "float64")
    block.append_op("elementwise_add", {"X": "a", "Y": "a"}, {"Out": ["c"]})
    block.append_op("relu", {"X": "c"}, {"Out": ["d"]})
    block.append_op("exp", {"X": "d"}, {"Out": ["e"]})
    assert block.rename_inputs(block.ops[0], {"a": "b"}) is True
    assert block.ops[0].inputs == {"X": ["b"], "Y": ["b"]}
    assert block.rename_inputs(block.ops[0], {"zzz": "b"}) is False
    with pytest.raises(OpError, match="cannot rename an input to ''"):
        block.rename_inputs(block.ops[1], {"c": ""})
    version = main.version
    removed = block.remove_ops([2, 0])
    assert [op.type for op in removed] == ["elementwise_add", "exp"] and [op.type for op in block.ops] == ["relu"]
    assert main.version > version
    assert block.remove_ops([]) == []
    with pytest.raises(ProgramError, match=r"no op at index 3 \(block has 1 ops\)"):
        block.remove_ops([3])


def test_remove_blocks_renumbers_and_refuses_to_orphan():
    main, out = _cond_program()
    assert len(main.blocks) == 3
    with pytest.raises(ProgramError, match=r"cannot remove block 1: an op of block 0 \(cond\) stays and owns it"):
        main.remove_blocks([1])
    with pytest.raises(ProgramError, match="cannot remove block 0"):
        main.remove_blocks([0])
    main.global_block().remove_op(len(main.global_block().ops) - 1)
    main.remove_blocks([1, 2])
    assert len(main.blocks) == 1


def test_the_operator_sugar_comes_from_the_builder():
    assert set(OPERATORS) >= {"__add__", "__radd__", "__matmul__", "__neg__", "__pow__", "__rtruediv__"}
    for name in OPERATORS:
        assert getattr(Variable, name) is vars(VariableOperators)[name]
    main, x, _ = _scaled_program()
    with program_guard(main, Program()):
        z = -(2.0 * x + x) ** 2
    assert [op.type for op in main.global_block().ops][-4:] == ["scale", "elementwise_add", "square", "scale"]
    assert z.shape == (3,)


def test_lists_held_by_ops_refuse_in_place_edits():
    main = Program()
    with program_guard(main, Program()):
        a = layers.data("a", [2, 3], "float64")
        layers.split(a, [1, 2], axis=1)
        layers.reduce_sum(a)
        layers.reduce_sum(a)
    split_op, sum_a, sum_b = main.global_block().ops
    version = main.version
    edits = [lambda: split_op.attrs["sections"].append(3), lambda: split_op.inputs["X"].__setitem__(0, "b"),
             lambda: split_op.outputs["Out"].pop(), lambda: sum_a.attrs["dim"].extend([0])]
    for edit in edits:
        with pytest.raises(ProgramError, match="cannot change in place"):
            edit()
    assert main.version == version and sum_b.attrs["dim"] == sum_a.attrs["dim"] == []
    sections = split_op.attrs["sections"]
    assert sections == [1, 2] and sections + [3] == [1, 2, 3] and type(list(sections)) is list
    split_op.attrs["sections"] = [1, 2]  # a new list (equal here: other sections would not fit the outputs)
    assert main.version > version and split_op.attrs["sections"] is not sections
    with pytest.raises(ProgramError):
        split_op.attrs["sections"].sort()
    assert Program.from_json(main.to_json()).to_json() == main.to_json()


def test_hand_edits_of_a_blocks_containers_are_seen_by_a_cached_plan():
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [3], "float64")
        y = layers.scale(x, scale=2.0)
        layers.assign(layers.scale(x, scale=5.0), output=y)  # y is overwritten: y = 5 x
    block = main.global_block()
    exe, feed = Executor(check_types=True), {"x": np.array([1.0, 2.0, 3.0])}
    (before,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    for edit in (lambda: block.ops.insert(3, block.ops[0]), lambda: block.ops.pop(), lambda: block.ops.reverse(),
                 lambda: block.ops.reverse(), lambda: block.vars.pop("z", None), lambda: main.blocks.extend([])):
        version = main.version
        edit()
        assert main.version > version
    del block.ops[1:]  # only y = 2 x is left
    (after,) = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(before, [5.0, 10.0, 15.0])
    np.testing.assert_array_equal(after, [2.0, 4.0, 6.0])


def test_shallow_copies_are_plain_deep_copies_stay_tracked_and_an_ops_type_is_fixed():
    import copy
    import pickle

    main, x, y = _scaled_program()
    block = main.global_block()
    op = block.ops[0]
    for container, plain in ((block.ops, list), (block.vars, dict), (op.attrs, dict), (op.inputs["X"], list)):
        assert type(copy.copy(container)) is plain and copy.copy(container) == container
    version = main.version
    copy.copy(block.ops).pop()
    assert main.version == version and len(block.ops) == 1
    for twin in (copy.deepcopy(main), pickle.loads(pickle.dumps(main))):
        twin_op = twin.global_block().ops[0]
        assert twin_op.attrs.program is twin and twin.global_block().ops.program is twin
        twin_version = twin.version
        twin_op.attrs["scale"] = 3.0
        with pytest.raises(ProgramError, match="cannot change in place"):
            twin_op.inputs["X"].append("y")
        assert twin.version > twin_version and main.version == version and op.attrs["scale"] == 2.0
        (out,) = Executor(check_types=True).run(twin, feed={"x": np.ones(3)}, fetch_list=[y.name], scope=Scope())
        np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])
    with pytest.raises(ProgramError, match=r"an op's type is fixed \(scale -> 'relu'\)"):
        op.type = "relu"


def test_every_list_an_op_holds_is_frozen_after_build_backward_and_load():
    from gradgen.framework import append_backward
    from gradgen.framework.tools.examples.rnn import rnn
    from gradgen.program.tracked import FrozenList, TrackedDict

    main, out = _cond_program()
    with program_guard(main, Program()):
        loss = layers.mean(layers.reduce_sum(layers.split(out, [1, 1])[0] * 3.0, dim=[0]))
        main.global_block().var("x").stop_gradient = False
        append_backward(loss)
    programs = [main, Program.from_json(main.to_json()), main.clone(), rnn().main]
    lists = 0
    for program in programs:
        for block in program.blocks:
            for op in block.ops:
                for fields in (op.inputs, op.outputs, op.attrs):
                    assert type(fields) is TrackedDict and fields.program is program
                    for value in fields.values():
                        assert type(value) is not list, (op.type, value)
                        lists += isinstance(value, FrozenList)
    assert lists > 100


def test_rename_inputs_looks_only_at_the_names_the_op_reads():
    """Renaming every op of a block with one mapping was quadratic: each call checked every new name."""
    class Counting(dict):
        looked = 0

        def values(self):
            Counting.looked += len(self)
            return super().values()

        def get(self, key, default=None):
            Counting.looked += 1
            return super().get(key, default)

    main = Program()
    block = main.global_block()
    block.create_var("a", [2], "float64")
    block.append_op("relu", {"X": "a"}, {"Out": ["c"]})
    mapping = Counting({f"n{k}": f"m{k}" for k in range(10_000)}, a="b", z="")
    assert block.rename_inputs(block.ops[0], mapping) is True
    assert block.ops[0].inputs == {"X": ["b"]} and Counting.looked <= 2
    with pytest.raises(OpError, match="cannot rename an input to ''"):
        block.rename_inputs(block.ops[0], {"b": ""})
