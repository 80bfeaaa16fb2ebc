"""The rules as data (generator/rules.py) hold in both renderers: each compiled rule's own example
(a planted violation) is refused by jaxgen and by `helm template` with one and the same line, and the
defaults break none of them."""

from __future__ import annotations

import pytest

from generator import checks
from generator.checks import validation_errors
from generator.engines.kubernetes import rules as kubernetes_rules
from generator.merging import merge
from generator.values import defaults

from .helm import helm_template, write_values

COMPILED = {f"{rule.path}-{i}": rule for i, rule in enumerate(checks.RULES + kubernetes_rules.RULES)}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_each_rule_refuses_its_example_in_both_renderers(name, tmp_path):
    rule = COMPILED[name]
    values = merge(defaults(), rule.example)
    expected = rule.error(values)
    assert expected is not None, "the example does not break its rule"
    assert expected in validation_errors(values)
    path = write_values(tmp_path, "example", rule.example)
    result = helm_template("rule", path)
    assert result.returncode != 0 and expected in result.stderr.splitlines(), result.stderr


def test_the_defaults_break_no_rule():
    assert [rule.path for rule in COMPILED.values() if rule.error(defaults())] == []
