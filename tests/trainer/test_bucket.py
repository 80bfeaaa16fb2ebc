"""Outputs in an S3-compatible bucket (--outputs-uri), against a real S3 HTTP server (moto_server):
a process killed mid-run resumes from the bucket on an empty disk, its results land there, and every
way the bucket can fail ends in one line with its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.procs import kill, outputs_of, small_train_args, start, trainer_argv, wait_all
from tests.support.s3 import CREDENTIALS, S3Server
from trainer import exit_codes

pytestmark = pytest.mark.timeout(600)

BUCKET, PREFIX = "jaxt-outputs", "runs/team"
RUN = "jax-training"  # the trainer's default --run-name


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s3 = S3Server(tmp_path_factory.mktemp("s3") / "moto.log")
    s3.bucket(BUCKET)
    yield s3
    s3.stop()


def bucket_args(server: S3Server, prefix: str = PREFIX) -> list[str]:
    return ["--outputs-uri", f"s3://{BUCKET}/{prefix}", "--outputs-endpoint", server.url]


def latest_step(server: S3Server, prefix: str) -> int | None:
    keys = server.keys(BUCKET, f"{prefix}/{RUN}/checkpoints/latest.json")
    return json.loads(server.read(BUCKET, keys[0]))["step"] if keys else None


def one_line_error(proc, code: int, text: str) -> str:
    assert wait_all([proc], 180) == [code], proc.output[-3000:]
    assert "Traceback" not in proc.output, proc.output[-3000:]
    errors = [line for line in proc.output.splitlines() if "error:" in line]
    assert len(errors) == 1 and text in errors[0], errors
    return errors[0]


@pytest.mark.slow
def test_a_killed_run_resumes_from_the_bucket_on_an_empty_disk_and_its_results_land_there(tmp_path, server):
    prefix = f"{PREFIX}/killed"
    args = [*bucket_args(server, prefix), "--epochs", "3", "--checkpoint-every", "8"]
    first = start(trainer_argv(*small_train_args(tmp_path / "first-disk", *args)), tmp_path / "first.log", CREDENTIALS)
    try:
        deadline = time.monotonic() + 240
        while (latest_step(server, prefix) or 0) < 16 and time.monotonic() < deadline:
            assert first.popen.poll() is None, first.output[-3000:]
            time.sleep(0.2)
    finally:
        kill(first)  # SIGKILL: no stop-signal save, the bucket holds whatever was uploaded
    step = latest_step(server, prefix)
    assert step is not None and 16 <= step < 96, first.output[-3000:]
    assert f"uploaded to s3://{BUCKET}/{prefix}/{RUN}" in first.output

    # A new disk, as a pod rescheduled elsewhere has: everything comes from the bucket.
    second = start(trainer_argv(*small_train_args(tmp_path / "second-disk", *args)), tmp_path / "second.log",
                   CREDENTIALS)
    assert wait_all([second], 300) == [0], second.output[-3000:]
    resumed_at = int(second.output.split("resuming from the checkpoint of step ")[1].split()[0])
    assert resumed_at >= step  # the newest complete one (a later one may have landed after the marker was read)
    assert f"downloaded the checkpoint of step {resumed_at} from s3://{BUCKET}/{prefix}/{RUN}" in second.output

    keys = server.keys(BUCKET, f"{prefix}/{RUN}/")
    base = f"{prefix}/{RUN}/"
    for part in ("summary.json", "metrics.jsonl", "model/model.safetensors", "model/config.json", "model/README.md"):
        assert base + part in keys, keys
    checkpoints = [k for k in keys if k.startswith(base + "checkpoints/ckpt-")]
    assert 1 <= len(checkpoints) <= 2, checkpoints  # the newest two, as on disk
    assert json.loads(server.read(BUCKET, base + "checkpoints/latest.json"))["step"] == 96
    summary = json.loads(server.read(BUCKET, base + "summary.json"))
    local = json.loads((outputs_of(tmp_path / "second-disk") / "summary.json").read_text())
    assert summary == local
    # the metrics came back from the bucket too: the run's history spans both attempts
    assert summary["restarts"] == 1 and summary["resumed_from"] == [resumed_at] and summary["steps"] == 96
    assert f"outputs: s3://{BUCKET}/{prefix}/{RUN} (model s3://{BUCKET}/{prefix}/{RUN}/model/" in second.output

    # What run.sh runs to bring them here: the results without the checkpoints, kept as a run of the job.
    fetched = jaxgen_command("results", f"s3://{BUCKET}/{prefix}/{RUN}", "--endpoint", server.url,
                             "--into", str(tmp_path / "results"))
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    run = (tmp_path / "results" / RUN / "latest").resolve()
    assert json.loads((run / "summary.json").read_text()) == summary
    assert (run / "model" / "model.safetensors").read_bytes() == \
        (outputs_of(tmp_path / "second-disk") / "model" / "model.safetensors").read_bytes()
    assert (run / "curves.png").is_file() and not (run / "checkpoints").exists()
    assert f"result: test accuracy {summary['test_accuracy']:.4f}" in fetched.stdout
    assert f"model:    {run / 'model' / 'model.safetensors'}" in fetched.stdout


def jaxgen_command(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed jaxgen command, with the server's credentials in its environment."""
    return subprocess.run([str(Path(sys.executable).with_name("jaxgen")), *args], capture_output=True, text=True,
                          env={**os.environ, **CREDENTIALS}, timeout=300, cwd=cwd)


@pytest.mark.parametrize(("uri", "said"), [
    ("s3://Bad_Bucket/x", "s3://Bad_Bucket/x: not s3://BUCKET/PREFIX/NAME"),
    ("s3://jaxt-outputs", "s3://jaxt-outputs: name the job's folder in the bucket"),
    (f"s3://{BUCKET}/nothing/here", f"s3://{BUCKET}/nothing/here: no outputs there"),
    ("s3://no-such-bucket/a/b", "s3://no-such-bucket/a/b: cannot fetch the outputs (NoSuchBucket"),
], ids=["bad-uri", "no-name", "empty", "no-bucket"])
def test_fetching_what_the_bucket_does_not_hold_is_one_line(tmp_path, server, uri, said):
    fetched = jaxgen_command("results", uri, "--endpoint", server.url, "--into", str(tmp_path / "results"))
    assert fetched.returncode == 2, fetched.stdout + fetched.stderr
    assert fetched.stderr.count("\n") == 1 and said in fetched.stderr, fetched.stderr
    assert fetched.stdout == "" and not (tmp_path / "results").exists()  # nothing written


def test_fetching_from_an_endpoint_that_is_no_url_is_one_line(tmp_path):
    fetched = jaxgen_command("results", f"s3://{BUCKET}/a/b", "--endpoint", "minio:9000", cwd=tmp_path)
    assert fetched.returncode == 2 and fetched.stderr.count("\n") == 1, fetched.stdout + fetched.stderr
    assert "--endpoint 'minio:9000': Invalid endpoint" in fetched.stderr
    assert list(tmp_path.iterdir()) == []  # not even the default --into folder


HOSTILE_KEYS = {  # after the job's prefix: what each would reach, were it taken for a path
    "/{home}/.bashrc": "an absolute path",
    "../escaped": "the folder above --into/NAME's run",
    "model//x": "an empty name",
    "./model/y": "a . name",
    "x" * 256: "a name no file system takes",
    "model/a\x1b[2J": None,  # a file name with an escape sequence: kept, and printed escaped
    "clash": "a file of a name that other objects use as a folder",
    "clash/inner": None,
}


def test_a_bucket_key_is_confined_as_a_file_name_is(tmp_path, server):
    prefix, home = f"{PREFIX}/hostile", tmp_path / "home"
    home.mkdir()
    client = server.client()
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/{RUN}/summary.json", Body=b'{"test_accuracy": 0.5}')
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/{RUN}/metrics.jsonl", Body=b"{}\n")
    for relative in HOSTILE_KEYS:
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{RUN}/" + relative.format(home=str(home).lstrip("/")),
                          Body=b"planted")
    listed = server.keys(BUCKET, f"{prefix}/{RUN}/")
    assert len(listed) == len(HOSTILE_KEYS) + 2, listed  # the server keeps every key as written
    fetched = jaxgen_command("results", f"s3://{BUCKET}/{prefix}/{RUN}", "--endpoint", server.url,
                             "--into", str(tmp_path / "results"), cwd=tmp_path)
    assert "Traceback" not in fetched.stderr and "\x1b" not in fetched.stdout + fetched.stderr, fetched.stderr
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert not (home / ".bashrc").exists() and not (tmp_path / "results" / "escaped").exists()
    planted = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == b"planted"]
    run = (tmp_path / "results" / RUN / "latest").resolve()
    assert sorted(planted) == [run / "clash" / "inner", run / "model" / "a\x1b[2J"], planted
    warnings = [line for line in fetched.stderr.splitlines() if line.startswith("warning: left out")]
    assert len(warnings) == len([why for why in HOSTILE_KEYS.values() if why]), fetched.stderr
    assert fetched.stderr.count("\n") == len(warnings), fetched.stderr  # one line each, nothing else
    assert f"warning: left out s3://{BUCKET}/{prefix}/{RUN}//{str(home).lstrip('/')}/.bashrc: not a file name" \
        in fetched.stderr
    assert any(line.endswith("other objects use its name as a folder") and f"{RUN}/clash:" in line
               for line in warnings), warnings


@pytest.mark.slow
def test_a_finished_run_in_the_bucket_is_not_trained_again(tmp_path, server):
    prefix = f"{PREFIX}/twice"
    first = start(trainer_argv(*small_train_args(tmp_path / "a", *bucket_args(server, prefix))), tmp_path / "a.log",
                  CREDENTIALS)
    assert wait_all([first], 240) == [0], first.output[-3000:]
    again = start(trainer_argv(*small_train_args(tmp_path / "b", *bucket_args(server, prefix))), tmp_path / "b.log",
                  CREDENTIALS)
    assert wait_all([again], 240) == [0], again.output[-3000:]
    assert "resuming from the checkpoint of step 32" in again.output
    assert "batch 8/32" not in again.output  # no step trained


def test_an_unreachable_server_is_one_line_with_the_checkpoint_code(tmp_path, server):
    from tests.support.procs import free_port

    args = ["--outputs-uri", f"s3://{BUCKET}/x", "--outputs-endpoint", f"http://127.0.0.1:{free_port()}"]
    proc = start(trainer_argv(*small_train_args(tmp_path, *args)), tmp_path / "t.log", CREDENTIALS)
    one_line_error(proc, exit_codes.CHECKPOINT, f"s3://{BUCKET}/x/{RUN}: cannot reach bucket {BUCKET}")


def test_a_missing_bucket_is_one_line_with_the_checkpoint_code(tmp_path, server):
    args = ["--outputs-uri", "s3://no-such-bucket/x", "--outputs-endpoint", server.url]
    proc = start(trainer_argv(*small_train_args(tmp_path, *args)), tmp_path / "t.log", CREDENTIALS)
    one_line_error(proc, exit_codes.CHECKPOINT, "s3://no-such-bucket/x/jax-training: cannot reach bucket no-such-bucket")


@pytest.mark.parametrize("uri", ["gs://bucket/x", "s3://", "s3://UPPER/x", "s3://a/x"])
def test_a_bad_uri_is_one_line_with_the_config_code(tmp_path, uri):
    proc = start(trainer_argv(*small_train_args(tmp_path, "--outputs-uri", uri)), tmp_path / "t.log")
    one_line_error(proc, exit_codes.CONFIG, f"--outputs-uri {uri!r} must be s3://BUCKET[/PREFIX]")


def test_an_endpoint_that_is_no_url_is_one_line_with_the_config_code(tmp_path):
    args = ["--outputs-uri", f"s3://{BUCKET}/x", "--outputs-endpoint", "minio:9000"]
    proc = start(trainer_argv(*small_train_args(tmp_path, *args)), tmp_path / "t.log", CREDENTIALS)
    one_line_error(proc, exit_codes.CONFIG, "--outputs-endpoint 'minio:9000': Invalid endpoint")


def test_a_foreign_marker_is_one_line_with_the_checkpoint_code(tmp_path, server):
    prefix = f"{PREFIX}/foreign"
    server.client().put_object(Bucket=BUCKET, Key=f"{prefix}/{RUN}/checkpoints/latest.json", Body=b"not json")
    proc = start(trainer_argv(*small_train_args(tmp_path, *bucket_args(server, prefix))), tmp_path / "t.log",
                 CREDENTIALS)
    one_line_error(proc, exit_codes.CHECKPOINT, "checkpoints/latest.json: not a checkpoint marker of this trainer")


def test_the_bucket_s_metrics_come_a_piece_at_a_time_up_to_their_last_complete_line(tmp_path, server, monkeypatch):
    from trainer import bucket

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    outputs = bucket.Bucket(f"s3://{BUCKET}/{PREFIX}/pieces", RUN, server.url)
    body = b'{"event": "start"}\n' * 200_000 + b'{"event": "st'  # 3.8 MB, read in pieces of 1 MiB
    server.client().put_object(Bucket=BUCKET, Key=outputs.key("metrics.jsonl"), Body=body)
    assert outputs._get_lines("metrics.jsonl", tmp_path / "metrics.jsonl")
    assert (tmp_path / "metrics.jsonl").read_bytes() == body[:body.rfind(b"\n") + 1]
    assert not outputs._get_lines("none.jsonl", tmp_path / "none.jsonl") and not (tmp_path / "none.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]  # no temporary file left


def test_a_huge_marker_is_read_with_a_bound_and_refused(tmp_path, server, monkeypatch):
    from trainer import bucket
    from trainer.errors import CheckpointError

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    outputs = bucket.Bucket(f"s3://{BUCKET}/{PREFIX}/huge-marker", RUN, server.url)
    body = b'{"step": 1, "file": "ckpt-0000000001.npz", "pad": "' + b"x" * (8 << 20) + b'"}'
    server.client().put_object(Bucket=BUCKET, Key=outputs.key("checkpoints/latest.json"), Body=body)
    read = []
    real_get = outputs._get
    monkeypatch.setattr(outputs, "_get", lambda relative, *how: read.append(real_get(relative, *how)) or read[-1])
    with pytest.raises(CheckpointError, match="not a checkpoint marker of this trainer"):
        outputs.restore(tmp_path, print)
    assert len(read[0]) == bucket.MAX_MARKER + 1  # never the whole object
