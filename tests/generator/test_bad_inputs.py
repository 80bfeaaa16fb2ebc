"""The bad-input corpus: every file exits 2, names its JSON path (or the file problem), writes nothing."""

import json

import pytest

from tests.support.paths import BAD_INPUTS_DIR

from tests.support.jaxgen import jaxgen

EXPECTED = json.loads((BAD_INPUTS_DIR / "expected.json").read_text())


def test_corpus_is_large_and_complete():
    files = sorted(p.name for p in BAD_INPUTS_DIR.iterdir() if p.name != "expected.json")
    assert len(files) >= 40
    assert files == sorted(EXPECTED), "every corpus file needs an expected path in expected.json"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_render_rejects(name, tmp_path):
    out = tmp_path / "out"
    result = jaxgen("render", str(BAD_INPUTS_DIR / name), "-o", str(out))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert EXPECTED[name] in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_rejects(name):
    result = jaxgen("validate", str(BAD_INPUTS_DIR / name))
    assert result.exit_code == 2
    assert EXPECTED[name] in result.stderr


def test_missing_file(tmp_path):
    result = jaxgen("render", str(tmp_path / "absent.json"), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "absent.json: no such file" in result.stderr
    assert not (tmp_path / "out").exists()


def test_directory_instead_of_file(tmp_path):
    result = jaxgen("render", str(tmp_path))
    assert result.exit_code == 2
    assert "is a directory" in result.stderr


def test_every_problem_is_reported_at_once():
    result = jaxgen("render", "--set", "hosts_count=0", "--set", "name=Bad", "--set", "trainig.epochs=1",
                    "--set", "training.strategy=x")
    assert result.exit_code == 2
    for path in ("$.hosts_count", "$.name", "$.trainig", "$.training.strategy"):
        assert path in result.stderr
    assert "4 problem(s)" in result.stderr


def test_typo_suggests_the_key():
    result = jaxgen("render", "--set", "trainig.epochs=1")
    assert "did you mean 'training'?" in result.stderr


def test_bad_set_syntax():
    result = jaxgen("render", "--set", "hosts_count")
    assert result.exit_code == 2
    assert "KEY.PATH=VALUE" in result.stderr


def test_failed_render_keeps_previous_output(tmp_path):
    out = tmp_path / "out"
    assert jaxgen("render", "-o", str(out)).exit_code == 0
    before = {p.name: p.read_text() for p in out.iterdir()}
    assert jaxgen("render", "--set", "hosts_count=0", "-o", str(out)).exit_code == 2
    assert {p.name: p.read_text() for p in out.iterdir()} == before
