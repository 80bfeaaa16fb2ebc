"""`jaxgen status|list|logs --local`: the runs of `jaxgen run` under its outputs folder.

A run's outputs directory (trainer/outputs.py: run.json, metrics.jsonl, checkpoints/, summary.json)
is found anywhere under the folder: the results `jaxgen run` collects at the end, and a claim's
directory (persistence.enabled) that a running job writes now. The newest one of a name is the run.
A job folder of `jaxgen run` (runs.py) says more: while its lock is held the run is the
outputs its process 0 writes now (a scratch emptyDir too), else its newest kept run, failed or not."""

from __future__ import annotations

import time
from pathlib import Path

from trainer import exit_codes, outputs
from trainer.results import iter_records

from .. import job_status
from ..errors import UserError
from ..job_status import FAILED, RUNNING, STOPPED, SUCCEEDED, JobStatus
from . import runs

MAX_DEPTH = 4  # <outputs>/<name>, <outputs>/claims/<claim>/<name>, and one more level of run ids


def _runs(folder: Path) -> dict[str, tuple[Path, bool]]:
    """The newest outputs directory of each run name under `folder`, and whether it runs now."""
    if not folder.is_dir():
        what = "not a directory" if folder.exists() else "no such directory"
        raise UserError(f"--outputs {folder}: {what} (jaxgen run writes its results there)")
    found: dict[str, Path] = {}
    for depth in range(1, MAX_DEPTH + 1):
        for marker in folder.glob("/".join(["*"] * depth) + f"/{outputs.METRICS}"):
            directory = marker.parent
            name = _name_of(directory)
            if name not in found or _mtime(directory) > _mtime(found[name]):
                found[name] = directory
    current = {name: (directory, False) for name, directory in found.items()}
    for job in folder.iterdir():
        if not runs.is_job_folder(job) or job.is_symlink():
            continue
        live = runs.running(job)
        if live is not None:
            current[job.name] = (Path(live) if live else job, True)
        elif kept := runs.runs(job):
            current[job.name] = (kept[-1], False)
    return current


def _name_of(directory: Path) -> str:
    """The job's name its run record gives, else the folder's: a name with a newline or an escape
    sequence (a foreign or edited record) would garble the listing."""
    name = (outputs.read_object(directory / outputs.RUN_FILE) or {}).get("name")
    return name if isinstance(name, str) and name.isprintable() and name.split() == [name] else directory.name


def _mtime(directory: Path) -> float:
    try:
        return (directory / outputs.METRICS).stat().st_mtime
    except OSError:
        return 0.0


def _status(name: str, directory: Path, now: float, live: bool = False) -> JobStatus:
    status = JobStatus(name=name, kind="local")
    first, final = job_status.apply_records(status, iter_records(directory / outputs.METRICS), now)
    summary = None if live else outputs.read_summary(directory)
    record = {} if live else runs.read_record(directory)  # how a kept run of `jaxgen run` ended
    last = final.get("event") if final else None
    ended = record.get("status")  # None: not a kept run, or running
    if ended == "finished" or (summary is not None and ended is None):
        status.phase, status.result = SUCCEEDED, outputs.result_line(summary) if summary else ""
        status.reason = "" if summary else "it left no summary (a program of its own)"
    elif ended == "failed":
        status.phase, status.reason = FAILED, _ended_with(record.get("exit_code"))
    elif last == "preempted" or ended == "stopped":
        resumable = outputs.newest_checkpoint(directory) or record.get("checkpoints")
        status.phase, status.reason = STOPPED, ("a rerun resumes from its last checkpoint" if resumable else
                                                "no checkpoint outlived it (they were in the run's scratch folders): "
                                                "a rerun starts over")
    elif final is None:
        status.phase, status.reason = RUNNING, "starting"
    else:
        status.phase = RUNNING
        status.reason = f"last record {job_status.format_duration(now - _mtime(directory))} ago"
    newest = outputs.newest_checkpoint(directory)
    if newest:
        status.checkpoint_step, status.checkpoint_age_seconds = newest[0], max(now - newest[1], 0.0)
    status.results = str(directory)
    started = first["time"] if first else record.get("started")
    status.age_seconds = max(now - started, 0.0) if isinstance(started, (int, float)) else None  # a clock stepped back
    return status


def _ended_with(code) -> str:
    """`exit code 3: <what the trainer's exit code 3 means>` (trainer/exit_codes.py)."""
    recorded = isinstance(code, int) and not isinstance(code, bool)  # JSON's true is no exit code
    return exit_codes.describe(code) if recorded else "no exit code recorded"


def status(name: str, folder: Path) -> JobStatus:
    found = _runs(folder)
    if name not in found:
        raise UserError(f"{name}: no run by that name under {folder} (jaxgen list --local shows them)")
    directory, live = found[name]
    return _status(name, directory, time.time(), live)


def jobs(folder: Path) -> list[JobStatus]:
    now = time.time()
    return sorted((_status(name, d, now, live) for name, (d, live) in _runs(folder).items()),
                  key=lambda s: -(s.age_seconds or 0))


class LocalJobs:
    """The runs of `jaxgen run` under an outputs folder, as engines.base.Jobs."""

    def __init__(self, outputs_dir: Path):
        self.outputs_dir = Path(outputs_dir)

    def status(self, name: str) -> JobStatus:
        return status(name, self.outputs_dir)

    def jobs(self) -> list[JobStatus]:
        return jobs(self.outputs_dir)

    def logs(self, name: str, rank: int, follow: bool, echo) -> int:
        return logs(name, self.outputs_dir, rank, follow, echo)


READ_BYTES = 64 * 1024  # one read of a log
FOLLOW_SECONDS = 0.5  # how often a followed log is read again


def _log_file(folder: Path, rank: int, live: bool) -> Path | None:
    """The log of process `rank` of the job's running run (its live logs, the newest) or of its newest
    kept run, failed or not; None when there is none (yet)."""
    if live:
        found = sorted(folder.glob(f".*.{runs.LOGS}"))
        directory = found[-1] if found else None
    else:
        kept = runs.runs(folder)
        directory = kept[-1] / runs.LOGS if kept else None
    path = directory / runs.log_name(rank) if directory else None
    return path if path and path.is_file() and not path.is_symlink() else None


def logs(name: str, folder: Path, rank: int, follow: bool, echo) -> int:
    """`jaxgen logs --local NAME`: the log of process `rank` of the job's running run, followed until the
    run ends (with follow), else of its newest kept run, failed or not."""
    job = folder / name
    if not job.is_dir() or not runs.is_job_folder(job):
        raise UserError(f"{name}: no run by that name under {folder} (jaxgen list --local shows them)")
    live = runs.running(job) is not None
    path = _log_file(job, rank, live)
    while path is None and live and follow:  # its processes have not started yet
        time.sleep(FOLLOW_SECONDS)
        live = runs.running(job) is not None
        path = _log_file(job, rank, live)
    if path is None:
        newest = runs.runs(job)[-1:] or [job]
        raise UserError(f"{name}: no log of rank {rank} in {newest[0]} (a run has one per process, rank-<i>.log in "
                        f"its {runs.LOGS} folder; runs kept before jaxgen run kept logs have none)")
    with open(path, "rb") as log:
        while True:
            while chunk := log.read(READ_BYTES):
                echo(chunk.decode(errors="replace"), nl=False)
            if not (live and follow):
                return 0
            live = runs.running(job) is not None  # read once more after its end: what it wrote last
            if live:
                time.sleep(FOLLOW_SECONDS)
