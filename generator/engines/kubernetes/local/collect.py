"""The end of a local run: what process 0 wrote is kept in a run folder of its own (generator/runstore/
intake.py), as scripts/run.sh fetches it from a cluster, and its result is printed (`jaxgen results`), or
why there is none."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from trainer import outputs
from trainer.config import fields_named, flag
from trainer.exit_codes import describe_exit
from trainer.extras import runnable

from ....runstore import confined, runs
from ....runstore.intake import RunRecord, finished_before
from .plan import LocalJob, last_flag_value

LR_SCHEDULE = fields_named("lr_schedule")[0]


def outputs_of(job: LocalJob) -> Path | None:
    """Process 0's outputs directory on this machine, as the job object records it (plan.py), or None."""
    return job.outputs_dir


def resumes_from(job: LocalJob, source: Path | None) -> str | None:
    """Where a rerun resumes from: the bucket's copy of process 0's outputs, restored into any new pod's,
    else its checkpoints on a volume that outlives the pods; None when nothing outlived it."""
    if job.outputs_uri:
        return f"{job.outputs_uri}/{outputs.CHECKPOINTS}"
    if source is None or any(source == d or d in source.parents for d in job.pod_dirs):
        return None
    return str(source / outputs.CHECKPOINTS)


def _again(job: LocalJob) -> str:
    """How to train the finished job again, as `jaxgen run` sets it (trainer/outputs.py again)."""
    schedule = last_flag_value(job.plans[0].argv, flag(LR_SCHEDULE)) if job.plans else None
    return outputs.again("--set name=NEW", "--set training.epochs=N", schedule or LR_SCHEDULE.default)


def status_of(code: int) -> str:
    return "finished" if code == 0 else "stopped" if code - 128 in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) \
        else "failed"


def finish(job: LocalJob, name: str, record: RunRecord | None, code: int, say) -> None:
    """Keep this run's outputs in its own run folder, and print its result, or why there is none;
    the results of earlier runs are never touched."""
    from ....results import report  # the summary as `jaxgen results` prints it (plot's modules, lazily)

    if record is None:
        return
    source = outputs_of(job)
    resumable = resumes_from(job, source)
    if code == 0 and finished_before(source, record.started):  # no run of the history: nothing was trained
        earlier = runs.latest(record.folder)
        say(f"{name} had already finished: nothing was trained and its results are unchanged"
            + (f" (the newest: {earlier})" if earlier else "") + "; no new run is recorded. " + _again(job))
        shutil.rmtree(record.log_dir, ignore_errors=True)
        return
    summarised, dropped = record.keep(source, name, status_of(code), code,
                                      # where process 0 wrote its outputs, and where a rerun resumes from: the
                                      # bucket's or a claim's checkpoints (an emptyDir's are gone)
                                      outputs=str(source) if source else None, outputs_uri=job.outputs_uri or None,
                                      checkpoints=resumable)
    finished = summarised and code == 0
    earlier = runs.latest(record.folder)
    if finished:
        runs.set_latest(record.folder, record.run_id)
        say(f"results of {name} kept in {record.path} (run {record.run_id}; {record.folder / runs.LATEST} "
            f"is the newest; `{runnable('jaxgen')} results {record.folder}` lists every run)")
        if line := confined.dropped_line(dropped):
            say(line)
        hint = (f"finished: the same command again trains nothing (its checkpoints: {resumable}). "
                + _again(job) if resumable else
                "none: the checkpoints were in the processes' scratch folders, removed when the run ended; "
                "persistence.enabled=true keeps them")
        report(record.path, resume_hint=hint)
        return
    say(f"run {record.run_id} of {name} {status_of(code)} ({describe_exit(code)})"
        + (": no result" if code else ", leaving no summary") + f"; its record is in {record.path}")
    if status_of(code) == "stopped" and source is not None:
        say(f"a rerun of the same command resumes from {resumable}" if resumable else
            "the checkpoints were in the processes' scratch folders, removed when the run ended: a rerun starts over "
            "(persistence.enabled=true keeps them)")
    if earlier is not None:
        say(f"the results of earlier runs are untouched: the newest finished one is {earlier}")

