"""The rule compiler (generator/rules.py): it writes the rules of every engine and of Kubernetes into
the chart, leaves other engines' rules out, refuses a fact the chart would read differently and a
condition outside its vocabulary. Each claim is checked against a planted rule that breaks it."""

from __future__ import annotations

import json

import pytest

from generator import rules
from generator.engines.slurm import checks as slurm_checks
from generator.rules import And, Fact, Gt, Int, Rule
from tests.support.paths import CHART_DIR

CONTRACT = json.loads((CHART_DIR / "files" / "contract.json").read_text())
PLANTED = Rule("$.hosts_count", Gt(Int("hosts_count"), 7), "%d planted hosts", (Int("hosts_count"),))


def test_the_generated_template_is_marked_and_holds_no_slurm_rule():
    text = (CHART_DIR / "templates" / "_rules.tpl").read_text()
    assert text.startswith(rules.GENERATED_HEADER)
    assert slurm_checks.RULES and not any(rule.message in text for rule in slurm_checks.RULES)


@pytest.mark.parametrize("engine, compiled", [(None, True), ("kubernetes", True), ("slurm", False)])
def test_only_the_charts_engines_are_compiled(engine, compiled):
    planted = Rule(PLANTED.path, PLANTED.when, PLANTED.message, PLANTED.args, engine)
    assert ("planted hosts" in rules.helm_template([planted], CONTRACT)) is compiled


def test_python_and_the_compiled_condition_agree_on_the_planted_rule():
    assert rules.errors([PLANTED], {"hosts_count": 8}) == ["$.hosts_count: 8 planted hosts"]
    assert rules.errors([PLANTED], {"hosts_count": 7}) == []
    assert '(gt (int $v.hosts_count) 7)' in rules.helm_template([PLANTED], CONTRACT)


def test_a_fact_the_chart_reads_otherwise_is_refused():
    real = CONTRACT["maxGpusPerHost"]
    agreeing = Rule("$.local_device_count", Gt(Int("local_device_count"), Fact("maxGpusPerHost", real)), "x")
    assert "$contract.maxGpusPerHost" in rules.helm_template([agreeing], CONTRACT)
    planted = Rule("$.local_device_count", Gt(Int("local_device_count"), Fact("maxGpusPerHost", real + 1)), "x")
    with pytest.raises(ValueError, match="maxGpusPerHost"):
        rules.helm_template([planted], CONTRACT)


def test_a_condition_outside_the_vocabulary_is_refused():
    with pytest.raises(TypeError, match="vocabulary"):
        And(Int("hosts_count"), lambda values: True)


def test_the_slurm_nodes_rule_binds_slurm_targets_only():
    """slurm.nodes is a key of the slurm engine: its rule refuses idle nodes there, and a Kubernetes
    target, which never reads the key, is not refused for it."""
    from generator.checks import validation_errors
    from generator.merging import merge
    from generator.values import defaults

    idle = {"slurm": {"nodes": 3}}
    assert "$.slurm.nodes: 3 nodes for 2 tasks leaves nodes idle" in validation_errors(
        merge(defaults(), {**idle, "target": "slurm"}))
    assert validation_errors(merge(defaults(), {**idle, "target": "indexed-job"})) == []


def test_the_text_words_give_sprigs_arguments_in_sprigs_order():
    """Sprig takes the part or pattern first (contains PART TEXT); the words take the text first, as Python."""
    from generator.rules import Contains, LastPart, Matches, Text

    text = Text("image.repository")
    values = {"image": {"repository": "localhost:5000/trainer:v2"}}
    assert (Contains(text, "@").helm(), Contains(text, "@").value(values)) == ('(contains "@" $v.image.repository)',
                                                                                False)
    assert LastPart(text, "/").helm() == '(splitList "/" $v.image.repository | last)'
    assert LastPart(text, "/").value(values) == "trainer:v2"
    assert Matches(text, "^[a-z]+$").helm() == '(regexMatch "^[a-z]+$" $v.image.repository)'
    assert Matches(text, "trainer:v2$").value(values) and not Matches(text, "^[a-z]+$").value(values)


@pytest.mark.parametrize("rule", slurm_checks.RULES, ids=lambda rule: rule.path)
def test_each_slurm_rule_refuses_its_example(rule):
    """The slurm engine's rules, which the chart never sees: jaxgen refuses each one's example with it."""
    from generator.checks import validation_errors
    from generator.merging import merge
    from generator.values import defaults

    values = merge(defaults(), rule.example)
    assert rule.error(values) in validation_errors(values)
    assert rule.error(merge(defaults(), {"target": "slurm"})) is None
