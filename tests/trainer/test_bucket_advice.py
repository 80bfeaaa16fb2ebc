"""A job that keeps its outputs in a bucket (--outputs-uri) is told, when another configuration owns
them, what works: the bucket's copy is restored into any empty --checkpoint-dir, so only another
--run-name or --outputs-uri (or deleting the bucket's copy too) starts it over; the advice names the
bucket, and following it succeeds."""

from __future__ import annotations

import pytest

from tests.support.procs import small_train_args, start, trainer_argv, wait_all
from tests.support.s3 import CREDENTIALS
from tests.trainer.test_bucket import BUCKET, PREFIX, RUN, bucket_args, one_line_error, server  # noqa: F401
from generator.runstore import runs
from trainer import exit_codes, ownership
from trainer.errors import CheckpointError

pytestmark = pytest.mark.timeout(600)


def test_the_refusal_names_the_bucket_in_either_spelling(tmp_path, monkeypatch):
    uri = f"s3://{BUCKET}/{PREFIX}/{RUN}"
    ownership.claim(tmp_path, RUN, {"seed": 0}, uri)
    with pytest.raises(CheckpointError) as refused:
        ownership.claim(tmp_path, RUN, {"seed": 1}, uri)
    assert str(refused.value).endswith(
        "choose another --run-name or --outputs-uri (variables: name, outputs.uri), or the original settings; "
        f"the job's copy in {uri} is restored into any --checkpoint-dir")
    monkeypatch.setenv("JAXT_SETTINGS_FROM_VARIABLES", "1")  # as jaxgen run starts it
    with pytest.raises(CheckpointError) as refused:
        ownership.claim(tmp_path, RUN, {"seed": 1}, uri)
    assert str(refused.value).endswith(
        f"or with the original settings, or delete {tmp_path} and every object under {uri}/ to start this job over")


@pytest.mark.slow
def test_another_configuration_of_a_bucket_job_is_told_what_works_and_it_does(tmp_path, server):  # noqa: F811
    prefix = f"{PREFIX}/advice"
    uri = f"s3://{BUCKET}/{prefix}/{RUN}"
    args = bucket_args(server, prefix)
    first = start(trainer_argv(*small_train_args(tmp_path / "a", *args)), tmp_path / "first.log", CREDENTIALS)
    assert wait_all([first], 240) == [0], first.output[-3000:]
    advice = ("choose another --run-name or --outputs-uri (variables: name, outputs.uri), or the original settings; "
              f"the job's copy in {uri} is restored into any --checkpoint-dir")
    other = ["--learning-rate", "0.05"]
    # its own folder, which the first run owns
    owned = start(trainer_argv(*small_train_args(tmp_path / "a", *args, *other)), tmp_path / "owned.log", CREDENTIALS)
    assert one_line_error(owned, exit_codes.CHECKPOINT, "with other settings").endswith(advice)
    # an empty folder, as the advice used to say: the bucket's checkpoint comes back into it
    empty = start(trainer_argv(*small_train_args(tmp_path / "b", *args, *other)), tmp_path / "empty.log", CREDENTIALS)
    assert one_line_error(empty, exit_codes.CHECKPOINT, "was written by another configuration").endswith(advice)
    # what the advice says
    named = start(trainer_argv(*small_train_args(tmp_path / "b", *args, *other, "--run-name", "other")),
                  tmp_path / "named.log", CREDENTIALS)
    assert wait_all([named], 240) == [0], named.output[-3000:]
    assert server.keys(BUCKET, f"{prefix}/other/summary.json")


@pytest.mark.parametrize("persistent", [False, True])
def test_a_stopped_local_bucket_run_says_it_resumes_from_the_bucket(tmp_path, persistent):
    """jaxgen run of a bucket job: a rerun resumes from the bucket's copy, which a new pod's emptyDir gets
    too; the hint and the run's record said the emptyDir's checkpoints were gone (or named the claim's)."""
    import signal
    import time

    from generator.engines.kubernetes.local.collect import finish
    from generator.engines.kubernetes.local.plan import LocalJob, ProcessPlan
    from generator.runstore.intake import RunRecord

    volume = tmp_path / ("claims" if persistent else "scratch/rank-0") / "checkpoints"
    job = LocalJob([ProcessPlan(0, "mnist-0", ["python", "-m", "trainer", "train"], {})], tmp_path / "scratch",
                   pod_dirs=[] if persistent else [volume], outputs_dir=volume / "mnist",
                   outputs_uri=f"s3://{BUCKET}/{PREFIX}/mnist")
    (volume / "mnist").mkdir(parents=True)
    record = RunRecord(tmp_path / "outputs" / "mnist", "20260101T000000.000Z-0000", time.time() - 5)
    record.folder.mkdir(parents=True)
    said: list[str] = []
    finish(job, "mnist", record, 128 + signal.SIGTERM, said.append)
    where = f"s3://{BUCKET}/{PREFIX}/mnist/checkpoints"
    assert said[-1] == f"a rerun of the same command resumes from {where}", said
    assert runs.read_record(record.path)["checkpoints"] == where


def test_restarted_local_processes_of_a_bucket_job_resume_from_the_bucket(tmp_path):
    from generator.engines.kubernetes.local.plan import LocalJob, ProcessPlan
    from generator.engines.kubernetes.local.supervise import Runner
    from generator.engines.kubernetes.policy import CHECKPOINTS_VOLUME

    volume = tmp_path / "scratch" / "rank-0" / "checkpoints"
    job = LocalJob([ProcessPlan(0, "mnist-0", ["python", "-m", "trainer", "train"], {})], tmp_path / "scratch",
                   pod_dirs=[volume], volume_dirs={CHECKPOINTS_VOLUME: {0: volume}}, outputs_dir=volume / "mnist",
                   outputs_uri=f"s3://{BUCKET}/{PREFIX}/mnist")
    said: list[str] = []
    Runner(job, 0, None, echo=said.append)._new_pods()
    assert said == [f"[jaxgen] the {CHECKPOINTS_VOLUME} volume is a scratch folder of each process, new with each "
                    f"restart: the restarted processes resume from s3://{BUCKET}/{PREFIX}/mnist/checkpoints"]
