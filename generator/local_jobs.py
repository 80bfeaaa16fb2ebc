"""`jaxgen status|list|logs --local`: the runs of `jaxgen run` under its outputs folder.

A run's outputs directory (trainer/outputs.py: run.json, metrics.jsonl, checkpoints/, summary.json)
is found anywhere under the folder: the results `jaxgen run` collects at the end, and a claim's
directory (persistence.enabled) that a running job writes now. The newest one of a name is the run."""

from __future__ import annotations

import time
from pathlib import Path

from trainer import outputs
from trainer.results import read_records

from . import job_status
from .errors import UserError
from .job_status import RUNNING, STOPPED, SUCCEEDED, JobStatus

MAX_DEPTH = 4  # <outputs>/<name>, <outputs>/claims/<claim>/<name>, and one more level of run ids


def _runs(folder: Path) -> dict[str, Path]:
    """The newest outputs directory of each run name under `folder`."""
    if not folder.is_dir():
        raise UserError(f"--outputs {folder}: no such directory (jaxgen run writes its results there)")
    found: dict[str, Path] = {}
    for depth in range(1, MAX_DEPTH + 1):
        for marker in folder.glob("/".join(["*"] * depth) + f"/{outputs.METRICS}"):
            directory = marker.parent
            name = _name_of(directory)
            if name not in found or _mtime(directory) > _mtime(found[name]):
                found[name] = directory
    return found


def _name_of(directory: Path) -> str:
    name = (outputs.read_object(directory / outputs.RUN_FILE) or {}).get("name")
    return name if isinstance(name, str) else directory.name


def _mtime(directory: Path) -> float:
    try:
        return (directory / outputs.METRICS).stat().st_mtime
    except OSError:
        return 0.0


def _status(name: str, directory: Path, now: float) -> JobStatus:
    status = JobStatus(name=name, kind="local")
    records = read_records(directory / outputs.METRICS)
    job_status.apply_records(status, records, now)
    summary = outputs.read_summary(directory)
    last = records[-1].get("event") if records else None
    if summary is not None:
        status.phase, status.result = SUCCEEDED, outputs.result_line(summary)
    elif last == "preempted":
        status.phase, status.reason = STOPPED, "preempted: a rerun resumes from its last checkpoint"
    else:
        status.phase = RUNNING
        status.reason = f"last record {job_status.format_duration(now - _mtime(directory))} ago"
    newest = outputs.newest_checkpoint(directory)
    if newest:
        status.checkpoint_step, status.checkpoint_age_seconds = newest[0], max(now - newest[1], 0.0)
    status.results = str(directory)
    starts = [r.get("time") for r in records if r.get("event") == "start" and r.get("time")]
    status.age_seconds = now - starts[0] if starts else None
    return status


def status(name: str, folder: Path) -> JobStatus:
    runs = _runs(folder)
    if name not in runs:
        raise UserError(f"{name}: no run by that name under {folder} (jaxgen list --local shows them)")
    return _status(name, runs[name], time.time())


def jobs(folder: Path) -> list[JobStatus]:
    now = time.time()
    return sorted((_status(name, d, now) for name, d in _runs(folder).items()), key=lambda s: -(s.age_seconds or 0))
