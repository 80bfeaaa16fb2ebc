"""`jaxgen run`: container paths become local ones by the mount that holds them most closely, in every
spelling the trainer reads (PATH, --flag PATH, --flag=PATH)."""

import json
import os
import re
import subprocess
import sys

import pytest

from generator.engines.kubernetes import render_documents
from generator.engines.kubernetes.local.collect import outputs_of
from generator.engines.kubernetes.local.plan import local_values, plan_job
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR, MNIST_DIR, REPO_ROOT

CPU_LOCAL = str(EXAMPLES_DIR / "cpu-local.json")
NESTED = ["checkpoint.dir=/data/mnist/outputs", "persistence.enabled=true"]


def plan(tmp_path, sets, set_strings=()):
    values = load_values([CPU_LOCAL], sets, set_strings=list(set_strings))
    return plan_job(values, render_documents(local_values(values)), tmp_path / "scratch", tmp_path / "claims")


def test_a_checkpoint_dir_inside_the_data_dir_is_on_its_own_volume(tmp_path):
    job = plan(tmp_path, NESTED)
    for rank, process in enumerate(job.plans):
        argv = process.argv
        assert argv[argv.index("--checkpoint-dir") + 1] == str(tmp_path / "claims" / "mnist-cpu-outputs")
        assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "scratch" / f"rank-{rank}" / "data")
    assert outputs_of(job) == tmp_path / "claims" / "mnist-cpu-outputs" / "mnist-cpu"


def test_a_path_after_an_equals_sign_is_mapped_too(tmp_path):
    job = plan(tmp_path, ["program.args[0]=--data-dir=/data/mnist/more"])
    assert f"--data-dir={tmp_path / 'scratch' / 'rank-0' / 'data'}/more" in job.plans[0].argv


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_checkpoints_inside_the_data_dir_persist_and_a_rerun_resumes(tmp_path):
    argv = [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(tmp_path / "outputs"),
            "--set", f"data.mirror={MNIST_DIR.as_uri()}/", "--set", "hosts_count=1", "--set", "training.epochs=1",
            "--set", "training.batch_size=64", "--set", "training.train_examples=2048",
            "--set", "training.mlp.hidden_sizes={64,64}", *[a for s in NESTED for a in ("--set", s)]]
    first = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=280)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    claim = tmp_path / "outputs" / "claims" / "mnist-cpu-outputs" / "mnist-cpu" / "checkpoints"
    assert (claim / "ckpt-0000000032.npz").exists(), first.stdout[-3000:]
    assert f"resume:   finished: the same command again trains nothing (its checkpoints: {claim})" in first.stdout
    again = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=280)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert re.search(r"Rank 0: resuming from the checkpoint of step 32", again.stdout), again.stdout[-3000:]


@pytest.mark.parametrize("args,message", [
    (["--run-na", "x"], "$.program.args: the trainer refuses its arguments: unrecognized arguments: --run-na x"),
    (["--checkpoint-d=/x"], "$.program.args: the trainer refuses its arguments: unrecognized arguments: --checkpoint-d=/x"),
    (["--epochs", "many"], "argument --epochs: 'many' is not an integer"),
    (["--epochs", "\u0662"], "argument --epochs: '\u0662' is not an integer"),
    (["--checkpoint-dir=/elsewhere"], "$.program.args[0]: --checkpoint-dir is set from checkpoint.dir"),
    (["--seed", "1", "--run-name", "other"], "$.program.args[2]: --run-name is set from name"),
    (["--metrics-file=elsewhere/m.jsonl"], "$.program.args[0]: --metrics-file elsewhere/m.jsonl is on none of "
                                           "the pod's volumes (/data/mnist, /checkpoints, /tmp)"),
    (["--compilation-cache", "elsewhere"], "$.program.args[0]: --compilation-cache elsewhere is on none"),
    (["--data-dir=/srv/elsewhere"], "$.program.args[0]: --data-dir /srv/elsewhere is on none"),
])
def test_trainer_args_that_would_be_refused_or_move_the_outputs_are_refused_before_a_start(tmp_path, args, message):
    """Nothing starts and nothing is written: in particular not outside the run's folder, where a path
    on none of the pod's volumes would be (a relative one in the current directory)."""
    argv = [sys.executable, "-m", "generator", "run", CPU_LOCAL, "--outputs", str(tmp_path / "outputs"),
            "--set-json", f"program.args={json.dumps(args)}"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr and "started" not in done.stdout, done.stderr
    assert message in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) <= 2, done.stderr  # the error, and the count of problems if any
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir())
    assert left in ([], ["outputs/mnist-cpu/.lock"]), left  # the job's lock file at most: no run, no claim


BUCKET = ["outputs.uri=s3://team-results/runs", "outputs.endpoint=http://127.0.0.1:9000",
          "outputs.secret=s3-credentials"]


def test_a_local_run_takes_the_bucket_credentials_of_outputs_secret_from_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local-secret")
    job = plan(tmp_path, BUCKET)
    for process in job.plans:
        assert process.env["AWS_ACCESS_KEY_ID"] == "local-key" and process.env["AWS_SECRET_ACCESS_KEY"] == "local-secret"
        argv = process.argv
        assert argv[argv.index("--outputs-uri") + 1] == "s3://team-results/runs"
        assert argv[argv.index("--outputs-endpoint") + 1] == "http://127.0.0.1:9000"


def test_a_local_run_without_the_bucket_credentials_says_what_to_export(tmp_path, monkeypatch):
    from generator.errors import UserError

    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    with pytest.raises(UserError, match="^outputs.secret: a local run cannot read Secret 's3-credentials': export "
                                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead$"):
        plan(tmp_path, BUCKET)
