"""The schema's patterns mean what they mean to Helm and the API server (Go's regexp, RE2: `$` is the end of
the text), not what Python's `re` makes of them (`$` also before a trailing newline)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.checks import schema, schema_errors
from generator.errors import excerpt
from generator.values import defaults

from tests.support.jaxgen import jaxgen


def _patterns(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            found.add(node["pattern"])
        for value in node.values():
            found |= _patterns(value)
    elif isinstance(node, list):
        for value in node:
            found |= _patterns(value)
    return found


PATTERNS = sorted(_patterns(schema()))


def test_schema_has_patterns_and_no_python_only_keywords():
    assert len(PATTERNS) >= 15
    assert "patternProperties" not in str(schema())  # only `pattern` is read the Go way


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_trailing_newline_never_matches(pattern):
    from generator.checks import _Validator

    validator = _Validator({"type": "string", "pattern": pattern})

    @settings(max_examples=25, deadline=None)
    @given(st.from_regex(pattern, fullmatch=True))
    def check(text):
        assert validator.is_valid(text)
        assert not validator.is_valid(text + "\n")

    check()


def test_defaults_pass_and_whitespace_is_ascii_whitespace_as_go_reads_it():
    values = defaults()
    assert schema_errors(values) == []
    values["data"]["mirror"] = "https://example.com/a\u00a0b/"  # NBSP: not whitespace to Go's \s
    assert schema_errors(values) == []
    values["data"]["mirror"] = "https://example.com/a b/"
    pattern = json.dumps(schema()['properties']['data']['properties']['mirror']['pattern'])
    message = f'"https://example.com/a b/" does not match {pattern}'
    assert schema_errors(values) == [f"$.data.mirror: {message if len(message) <= 240 else excerpt(message)}"]


def test_slurm_env_name_with_a_trailing_newline_is_refused_in_one_line():
    result = jaxgen("render", "--target", "slurm", "--set-json", 'env=[{"name": "A_\\n", "value": "x"}]')
    assert result.exit_code == 2
    assert "$.env[0].name" in result.stderr and "Traceback" not in result.stderr


def test_matching_takes_linear_time_whatever_the_input():
    """A backtracking engine takes exponential time on this name; Go's regexp, and ours, do not."""
    values = defaults()
    values["name"] = "0" + ".0-0" * 2000 + "-\n"
    started = time.perf_counter()
    assert any(e.startswith("$.name") for e in schema_errors(values))
    assert time.perf_counter() - started < 5
