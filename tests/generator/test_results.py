"""`jaxgen results` on whatever a summary or a metrics file holds: the result line says what is known,
a diverged run is a result (exit 0) that says so, and nothing is a traceback."""

import json
import math

import pytest

from tests.support.jaxgen import jaxgen
from trainer import outputs

SUMMARY = {"name": "job", "status": "completed", "test_accuracy": 0.9512, "train_accuracy": 0.95, "loss": 0.2,
           "epochs": 1, "steps": 32, "wall_seconds": 12.5, "examples_per_second": 2048.0, "restarts": 0,
           "resumed_from": []}


ACCOUNT = {"goodput": 0.5, "wall_seconds": 2.0, "badput_seconds": {"data_loading": 1.0}}


def run_dir(tmp_path, summary, metrics: str = "") -> str:
    run = tmp_path / "job"
    run.mkdir()
    (run / "run.json").write_text("{}")
    if summary is not None:
        (run / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    if metrics:
        (run / "metrics.jsonl").write_text(metrics)
    return str(run)


@pytest.mark.parametrize("changes,expected", [
    ({}, "test accuracy 0.9512, train accuracy 0.9500 after 1 epoch (32 steps) in 12.5 s, 2048 examples/s"),
    # what the trainer writes with --metrics-file /dev/null: no time, no speed measured
    ({"wall_seconds": None, "examples_per_second": None}, "test accuracy 0.9512, train accuracy 0.9500 after 1 epoch "
                                                          "(32 steps)"),
    ({"wall_seconds": 0.0, "examples_per_second": None}, "after 1 epoch (32 steps)"),
    ({"test_accuracy": None, "steps": "x", "epochs": [2]}, "test accuracy n/a, train accuracy 0.9500 after n/a epochs "
                                                           "(n/a steps)"),
    ({"restarts": 2, "resumed_from": 7}, "(32 steps) in 12.5 s"),
    ({"goodput": ACCOUNT}, "(32 steps) in 12.5 s"),
    ({"restarts": "x" * 10000, "resumed_from": [1] * 10000}, "(32 steps) in 12.5 s"),
    ({"test_accuracy": 10**400, "wall_seconds": -10**400}, "test accuracy n/a, train accuracy 0.9500"),
    ({"goodput": [1]}, "(32 steps) in 12.5 s"),
    ({"goodput": {"goodput": 0.5, "wall_seconds": 2, "badput_seconds": {"other kind": 1}}}, "(32 steps) in 12.5 s"),
    ({"goodput": {"goodput": "x", "wall_seconds": None, "badput_seconds": {}}}, "(32 steps) in 12.5 s"),
])
def test_odd_summaries_say_what_is_known(tmp_path, changes, expected):
    result = jaxgen("results", run_dir(tmp_path, {**SUMMARY, **changes}))
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("result: ") and expected in first and "nan" not in first, first
    assert max(len(line) for line in result.stdout.splitlines()) < 1000
    assert ("goodput:" in result.stdout) == ("goodput" in changes and changes["goodput"] == ACCOUNT), result.stdout


def test_a_summary_with_every_key_missing_or_null(tmp_path):
    for summary in ({}, {key: None for key in SUMMARY}):
        assert outputs.result_line(summary) == "test accuracy n/a, train accuracy n/a after n/a epochs (n/a steps)"


@pytest.mark.parametrize("text", ["[1, 2]", '"x"', "null", "{", "[" * 100000, '{"steps": 1' + "0" * 5000 + "}"])
def test_a_summary_that_is_not_an_object_is_no_result(tmp_path, text):
    result = jaxgen("results", run_dir(tmp_path, text))
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "the run did not finish (summary.json is not a summary; it recorded no step)" in result.stdout


@pytest.mark.parametrize("token", ["NaN", "Infinity"])
def test_a_diverged_run_is_its_result_and_says_so(tmp_path, token):
    summary = json.dumps({**SUMMARY, "loss": math.nan}).replace("NaN", token)
    metrics = (f'{{"event": "step", "epoch": 1, "step": 8, "loss": {token}}}\n'
               f'{{"event": "epoch", "epoch": 1, "step": 32, "loss": {token}, "train_accuracy": 0.1, '
               '"test_accuracy": 0.098}\n{"event": "end", "step": 32}\n')
    result = jaxgen("results", run_dir(tmp_path, summary, metrics))
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.splitlines()[0].endswith(f"; diverged: the loss is {float(token.lower())}")


def test_end_records_without_a_step(tmp_path):
    metrics = ('{"event": "start", "step": 0, "time": 1}\n{"event": "step", "epoch": 1, "step": 8, "loss": 1}\n'
               '{"event": "end"}\n{"event": "preempted", "step": "x"}\n{"event": "end", "step": true}\n')
    result = jaxgen("results", run_dir(tmp_path, None, metrics))
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.endswith("(summary.json is missing; its last record is step 8)\n")


def test_metrics_that_cannot_be_drawn_are_a_note_and_the_result_stands(tmp_path):
    result = jaxgen("results", run_dir(tmp_path, SUMMARY, '{"event": "step", "step": -1, "loss": 1}\n'))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("note: no curves.png: ") and "step record needs a number" in result.stderr
    assert result.stdout.startswith("result: test accuracy 0.9512")


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_curves_png_that_is_no_file_is_left_as_it_is_and_the_result_stands(tmp_path, kind):
    """A run's curves.png that is a folder or a FIFO (a device the same) is not replaced: a note names
    what stands there, and the result is printed."""
    import os
    import stat

    run = run_dir(tmp_path, SUMMARY, '{"event": "step", "step": 1, "loss": 1}\n')
    curves = os.path.join(run, "curves.png")
    os.mkdir(curves) if kind == "folder" else os.mkfifo(curves)
    result = jaxgen("results", run)
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == f"note: no curves.png: {curves}: cannot write: not a regular file ({kind}): left as it is\n"
    assert result.stdout.startswith("result: test accuracy 0.9512")
    assert (stat.S_ISDIR if kind == "folder" else stat.S_ISFIFO)(os.lstat(curves).st_mode)


def test_a_jobs_runs_with_odd_records_are_listed(tmp_path):
    """The listing of a job's runs says '-' for what a record or summary does not hold as a number; a
    run record that never ends (/dev/zero) is not read whole."""
    job = tmp_path / "job"
    odd, endless = job / "20261126T000000.000Z-aaaa", job / "20261126T000001.000Z-bbbb"
    for run in (odd, endless):
        run.mkdir(parents=True)
        (run / "run.json").write_text("{}")
    (odd / "summary.json").write_text('{"test_accuracy": null, "wall_seconds": "x", "loss": 1}')
    (odd / "jaxgen-run.json").write_text('{"status": ["completed"], "exit_code": "' + "9" * 100 + '", "wall_seconds": "y"}')
    (endless / "jaxgen-run.json").symlink_to("/dev/zero")
    (job / "latest").symlink_to(odd.name)
    result = jaxgen("results", str(job))
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["*", odd.name, "['completed']", "(exit", "9999999999)", "-", "-"], lines[1]
    assert lines[2].split() == [endless.name, "unknown", "-", "-"], lines[2]
    assert lines[4].startswith("result: test accuracy n/a")
