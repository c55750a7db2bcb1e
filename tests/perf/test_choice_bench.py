"""The choice bench's ``--rule``: a trial rule set in every probe process, named as ``trial_rules`` names it."""
from __future__ import annotations

import pytest

from tests.bench.choice import _rule


def test_a_rule_is_a_trial_rules_name_and_its_json_value():
    assert _rule("RECHECK_MARGIN=0.2") == ("RECHECK_MARGIN", 0.2)
    assert _rule("TRIAL_SECONDS=3.5") == ("TRIAL_SECONDS", 3.5)


@pytest.mark.parametrize("given", ["NO_SUCH_RULE=1", "TRIAL_SECONDS=", "TRIAL_SECONDS", "_lock=1", "TRIAL_SECONDS=abc"])
def test_anything_else_is_refused_by_name(given):
    with pytest.raises(SystemExit, match="NAME=JSON"):
        _rule(given)
