"""The end of a local run: what process 0 wrote is copied into a run folder of its own
(<outputs>/<name>/<run id>, generator/runs.py), as scripts/run.sh fetches it from a cluster, and its
result is printed (`jaxgen results`), or why there is none."""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer import outputs
from trainer.config import fields_named, flag
from trainer.exit_codes import describe_exit
from trainer.extras import runnable

from .... import confined, runs
from ....errors import UserError
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


def _written_since(source: Path, since: float) -> bool:
    """Whether anything in the outputs directory (not its checkpoints) was written since `since`."""
    for path in source.rglob("*"):
        if outputs.CHECKPOINTS in path.relative_to(source).parts[:1]:
            continue
        try:
            if path.lstat().st_mtime >= since:
                return True
        except OSError:
            pass
    return False


def collect(source: Path | None, staging: Path, since: float) -> tuple[bool, list[str]]:
    """Copy what this run wrote into the new folder `staging` (not the checkpoints or the compilation
    cache, nor a summary an earlier run left in a persistent volume): regular files and folders only,
    a link is never followed (generator/confined.py). Returns whether this run's summary is there, and
    what was left out (links, devices…) by relative path."""
    if source is None or not source.is_dir() or not _written_since(source, since):
        staging.mkdir(parents=True)
        return False, []  # refused or stopped before it wrote anything: nothing here is this run's
    stale = [outputs.SUMMARY] if (source / outputs.SUMMARY).exists() and \
        (source / outputs.SUMMARY).stat().st_mtime < since else []
    dropped = confined.copy_tree(source, staging, skip=(outputs.CHECKPOINTS, outputs.XLA_CACHE, *stale))
    return (staging / outputs.SUMMARY).exists(), dropped


def finished_before(source: Path | None, since: float) -> bool:
    """Whether a run that ended well trained nothing because its job had already finished: the summary
    and the metrics in its outputs (a claim's) are an earlier run's, untouched since this run began."""
    try:
        return source is not None and all((source / f).stat().st_mtime < since
                                          for f in (outputs.SUMMARY, outputs.METRICS))
    except OSError:
        return False


def _again(job: LocalJob) -> str:
    """How to train the finished job again, as `jaxgen run` sets it (trainer/outputs.py again)."""
    schedule = last_flag_value(job.plans[0].argv, flag(LR_SCHEDULE)) if job.plans else None
    return outputs.again("--set name=NEW", "--set training.epochs=N", schedule or LR_SCHEDULE.default)


def status_of(code: int) -> str:
    return "finished" if code == 0 else "stopped" if code - 128 in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) \
        else "failed"


@dataclass
class RunRecord:
    """One run of a job kept in <outputs>/<name>/<run_id>/ (generator/runs.py)."""

    folder: Path  # <outputs>/<name>
    run_id: str
    started: float  # time.time()
    clock: float = field(default_factory=time.monotonic)  # the same moment, for the run's wall time

    @property
    def path(self) -> Path:
        return self.folder / self.run_id

    @property
    def log_dir(self) -> Path:
        """Where its processes' logs are written while it runs (runs.live_logs), moved into it at its end."""
        return runs.live_logs(self.folder, self.run_id)


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
    staging = record.folder / f".{record.run_id}.collecting"
    try:
        summarised, dropped = collect(source, staging, record.started)
        if record.log_dir.is_dir():  # its processes' logs, every attempt's, a failed run's too
            os.rename(record.log_dir, staging / runs.LOGS)
        finished = summarised and code == 0
        ended = time.time()  # a record's date; the wall time is measured on the monotonic clock
        runs.write_record(staging, {"run_id": record.run_id, "name": name, "status": status_of(code),
                                    "exit_code": code, "started": round(record.started, 3),
                                    "ended": round(ended, 3),
                                    "wall_seconds": round(time.monotonic() - record.clock, 1),
                                    # where a rerun resumes from: the bucket's or a claim's checkpoints (an
                                    # emptyDir's are gone)
                                    "checkpoints": resumable})
        os.rename(staging, record.path)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"--outputs {record.folder.parent}: cannot keep the run's results: "
                        f"{error.strerror or error}") from None
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

