"""The bad-input corpus: every file exits 2, names its JSON path (or the file problem), writes nothing."""

import json
import subprocess
import sys

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


@pytest.mark.parametrize("args,message", [
    ([b"--set", b"labels.team=caf\xe9"], "--set: $.labels.team: byte 0xe9 is not UTF-8"),
    ([b"--set-string", b"image.tag=v\xfe"], "--set-string: $.image.tag: byte 0xfe is not UTF-8"),
    ([b"--set", b"annotations.n\xffte=x"], "--set: $.annotations.n\\udcffte: byte 0xff is not UTF-8"),
    ([b"--set", b"name=a\xed\xa0\xbd"], "--set: $.name: byte 0xed is not UTF-8"),
    ([b"--set-json", b'env=[{"name": "A", "value": "\\ud83d"}]'],
     "--set-json: $.env[0].value: \\ud83d is half of a surrogate pair"),
    ([b"--set-json", b'{"labels": {"a": "\\udc00"}}'], "--set-json: $.labels.a: \\udc00 is half of a surrogate pair"),
    # the escape of a low half that Python also uses for a byte: an escape here, a byte only when it was one
    ([b"--set-json", b'{"labels": {"a": "\\udc80"}}'], "--set-json: $.labels.a: \\udc80 is half of a surrogate pair"),
    ([b"--set-json", b'{"labels": {"a": "\xff"}}'], "--set-json: $.labels.a: byte 0xff is not UTF-8"),
], ids=ascii)
def test_text_that_is_not_unicode_on_the_command_line_is_one_line(args, message):
    """Bytes that are not UTF-8 (Python hands them on as lone surrogates) and JSON's lone surrogates: the
    real command, with its real argv and stderr, names the option and the field in one line."""
    proc = subprocess.run([sys.executable, "-m", "generator", "render", *args], capture_output=True, timeout=60)
    stderr = proc.stderr.decode("utf-8")
    assert proc.returncode == 2 and proc.stdout == b"", stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith(f"error: {message}"), stderr


def test_an_empty_namespace_option_is_the_default_namespace():
    docs = jaxgen("render", "-n", "").documents()  # as helm template -n '' (tests/chart/test_bad_inputs.py)
    assert {doc["metadata"]["namespace"] for doc in docs} == {"default"}


@pytest.mark.parametrize("command", ["results", "plot"])
def test_integers_of_thousands_of_digits_in_a_run_are_one_line(tmp_path, command):
    """Python refuses to turn more than 4300 digits into an int; a run's files may hold any number."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"event": "step", "step": ' + "9" * 5000 + ', "loss": 0.5}\n')
    (run / "summary.json").write_text('{"steps": ' + "9" * 5000 + "}\n")
    args = [str(run)] if command == "results" else [str(run / "metrics.jsonl"), "-o", str(tmp_path / "c.png")]
    result = jaxgen(command, *args)
    # plot fails on its input; results still answers (the curves are a note, the run did not finish: 1)
    assert result.exit_code == (2 if command == "plot" else 1), result.stderr
    assert "step record needs a number from 0" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("option", ["--set", "--set-string", "--set-json"])
def test_integers_of_thousands_of_digits_on_the_command_line_are_one_line(option):
    result = jaxgen("render", option, "training.seed=" + "9" * 5000)
    assert result.exit_code == 2 and result.stdout == ""
    assert "$.training.seed: " in result.stderr and len(result.stderr.splitlines()) <= 2, result.stderr


def test_a_number_out_of_range_is_not_sent_to_set_json(tmp_path):
    """Thousands of digits are no number however they are written: no advice to write them otherwise."""
    path = tmp_path / "huge.json"
    path.write_text('{"training": {"epochs": ' + "7" * 5000 + "}}")
    for args in ([str(path)], ["--set", "training.epochs=" + "7" * 5000]):
        result = jaxgen("render", *args)
        assert result.exit_code == 2 and "$.training.epochs: " in result.stderr, result.stderr
        assert "--set-json" not in result.stderr and "unquoted" not in result.stderr, result.stderr


def test_messages_show_values_as_written_not_as_python_reprs():
    result = jaxgen("render", "--set", "image.pull_policy=Sometimes,hosts_count=x,labels.b=true,queue_name=null",
                    "--set-json", 'annotations={"a": [1, {"b": null}]}')
    assert result.exit_code == 2
    for line in ('$.image.pull_policy: "Sometimes" is not one of "", "Always", "IfNotPresent", "Never"',
                 '$.hosts_count: "x" is not of type integer', "$.labels.b: true is not of type string",
                 "$.queue_name: null is not of type string", '$.annotations.a: [1, {"b": null}] is not of type string'):
        assert line in result.stderr, result.stderr
    assert not any(word in result.stderr for word in ("None", "True", "['", "{'"))
