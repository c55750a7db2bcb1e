"""Every op with a grad maker has a tangent rule, beside the maker, and tangent rules emit only ops forward mode can
push through."""
from __future__ import annotations

from gradgen import grad_makers
from gradgen.grad_makers import GRAD_MAKERS, NON_DIFFERENTIABLE
from gradgen.grad_makers.tangents import FAMILIES, TANGENT_RULES, collect
from gradgen.program import OP_SCHEMAS


def test_every_op_with_a_grad_maker_has_a_tangent_rule():
    missing = sorted(set(GRAD_MAKERS) - set(TANGENT_RULES))
    assert not missing, f"ops with a grad maker but no tangent rule: {missing}"


def test_tangent_rules_are_only_for_differentiable_ops():
    assert not set(TANGENT_RULES) & NON_DIFFERENTIABLE
    assert set(TANGENT_RULES) <= set(OP_SCHEMAS)


def test_every_op_a_rule_emits_is_registered_and_has_a_rule_itself():
    """So tangents of tangents (forward over forward) and gradients of tangents work too."""
    for op_type, rule in TANGENT_RULES.items():
        for emitted in rule.emits:
            assert emitted in OP_SCHEMAS, f"{op_type}'s tangent rule emits unknown op '{emitted}'"
            assert emitted in TANGENT_RULES or emitted in NON_DIFFERENTIABLE, (op_type, emitted)
            assert emitted in GRAD_MAKERS or emitted in NON_DIFFERENTIABLE, (op_type, emitted)


def test_collecting_twice_is_the_same_table():
    assert collect(FAMILIES) == TANGENT_RULES


def _holder(attr: str) -> dict[str, str]:
    """Op type -> the family module whose namespace holds the function tagged for it with ``attr``."""
    return {op_type: family.__name__ for family in grad_makers.FAMILIES for fn in vars(family).values()
            for op_type in getattr(fn, attr, ())}


def test_each_tangent_rule_sits_in_the_module_of_its_grad_maker():
    """One op, one place: an op's forward rule is stated beside its reverse rule, as JAX's defjvp is."""
    makers, rules = _holder("grad_of"), _holder("tangent_of")
    apart = {op_type: (makers.get(op_type), module) for op_type, module in rules.items()
             if makers.get(op_type) != module}
    assert not apart, f"op -> (its maker's module, its tangent rule's module): {apart}"


def test_the_tangent_rules_are_gathered_from_the_grad_makers_families():
    assert FAMILIES is grad_makers.FAMILIES
