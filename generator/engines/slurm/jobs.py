"""`jaxgen status|list|logs --slurm`: a batch job by its name (the sbatch script's --job-name, the
variables' name), from squeue while it is queued or running and sacct after; the training figures
from its outputs directory on the shared filesystem (the script's --checkpoint-dir and --run-name),
its log from its output file, whose lines carry `Rank i:`."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from trainer import exit_codes, outputs
from trainer.integers import parse_count
from trainer.results import iter_records

from ... import job_status
from ...errors import Unreachable, UserError
from ...job_status import FAILED, PENDING, QUEUED, RUNNING, STOPPED, SUCCEEDED, JobStatus

TIMEOUT = 20
PHASES = {"PENDING": QUEUED, "CONFIGURING": PENDING, "RUNNING": RUNNING, "COMPLETING": RUNNING,
          "COMPLETED": SUCCEEDED, "FAILED": FAILED, "TIMEOUT": FAILED, "NODE_FAIL": FAILED, "OUT_OF_MEMORY": FAILED,
          "CANCELLED": STOPPED, "PREEMPTED": STOPPED, "REQUEUED": QUEUED, "SUSPENDED": STOPPED}


class SchedulerError(Unreachable):
    """SLURM cannot be asked (no squeue/sacct, no controller)."""


def _run(*argv: str) -> str:
    if shutil.which(argv[0]) is None:
        raise SchedulerError(f"{argv[0]}: not found on PATH (is this a SLURM login node?)")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{argv[0]}: no answer from SLURM in {TIMEOUT} s") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"]
        raise SchedulerError(f"{argv[0]}: {lines[-1]}")
    return proc.stdout


ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED")
# squeue's reason a job is pending (squeue(1), JOB REASON CODES), in words: the cause line of a waiting job.
WAITING = {
    "Resources": "the resources it asks for are busy",
    "Priority": "jobs of higher priority go first",
    "Dependency": "it waits for a job it depends on (--dependency) to end",
    "DependencyNeverSatisfied": "a job it depends on ended so that it can never start (scancel it)",
    "BeginTime": "its start time (--begin, or a requeue's delay) has not come yet",
    "JobHeldUser": "it is held (scontrol release ID)",
    "JobHeldAdmin": "an administrator holds it",
    "ReqNodeNotAvail": "a node it needs is not available (down, drained or reserved)",
    "NodeDown": "a node it needs is down",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows or has up",
    "PartitionTimeLimit": "its time limit is longer than its partition's",
    "Reservation": "it waits for its reservation to start",
    "BadConstraints": "no node can ever meet its constraints (scancel it)",
    "Cleaning": "its previous run is still being cleaned up (a requeue)",
    "launch failed requeued held": "its launch failed; SLURM requeued and held it (scontrol release ID)",
}
LIMITS = {"Assoc": "a limit of its account (association)", "QOS": "a limit of its QOS"}


def _queued(name: str | None = None) -> list[dict]:
    """squeue's jobs of the user (of one name), oldest first, finished ones too while the controller
    still holds them (MinJobAge, 300 s by default): id, name, state, reason, elapsed, script, workdir."""
    out = _run("squeue", "-h", "-t", "all", *(["-n", name] if name else ["--me"]), "-o", "%i|%j|%T|%r|%M|%o|%Z")
    keys = ("id", "name", "state", "reason", "elapsed", "script", "workdir")
    return [dict(zip(keys, line.split("|", 6))) for line in out.splitlines() if line.count("|") >= 6]


def _accounted(name: str | None = None) -> list[dict]:
    """sacct's jobs (whole jobs, not steps), oldest first: from the accounting storage, else from the
    job completion file (-c); [] where neither is kept."""
    out = ""
    for source in ([], ["-c"]):
        try:
            out = _run("sacct", *source, "-n", "-P", "-X", *(["--name", name] if name else []),
                       "-o", "JobID,JobName,State,ExitCode,WorkDir")
            break
        except SchedulerError:
            continue
    keys = ("id", "name", "state", "exit_code", "workdir")
    jobs = [dict(zip(keys, line.split("|", 4))) for line in out.splitlines() if line.count("|") >= 4]
    return [job for job in jobs if name is None or job["name"] == name]  # sacct -c does not filter by name


MAX_SCRIPT = 1 << 20  # bytes of an sbatch script read: prepare.sh writes a few KB


def _flags(script: Path) -> dict[str, str]:
    """--checkpoint-dir and --run-name of the trainer in an sbatch script, where readable: a regular
    file of at most MAX_SCRIPT bytes (the job names it: /dev/zero has no end, a FIFO no writer)."""
    try:
        if not script.is_file():
            return {}
        with open(script, "rb") as f:
            text = f.read(MAX_SCRIPT + 1)
        if len(text) > MAX_SCRIPT:
            return {}
        words = shlex.split(text.decode("utf-8", "replace"), comments=True)
    except (OSError, ValueError):
        return {}
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--checkpoint-dir", "--run-name")}


def _exit(exit_code: str) -> str:
    """sacct's ExitCode, CODE:SIGNAL, in words: the signal that killed the job or what its code means."""
    code_text, _, signal_text = exit_code.partition(":")
    code, signal = parse_count(code_text), parse_count(signal_text)
    if code is None or signal is None:
        return f"exit code {exit_code}"
    return exit_codes.describe_exit(-signal if signal else code)


def _requeues(job_id: str | None = None) -> dict[str, int]:
    """How many times SLURM started each job it holds again (scontrol's Restarts), by job id; {} unknown.
    With job_id, that job's only (without, scontrol prints every job of the cluster)."""
    try:
        out = _run("scontrol", "show", "job", "-o", *([job_id] if job_id else []))
    except SchedulerError:
        return {}
    return {found[1]: int(found[2]) for line in out.splitlines()
            if (found := re.match(r"JobId=(\S+) .*?\bRestarts=(\d+)", line))}


def _waiting(reason: str) -> str:
    """squeue's pending reason in words (ReqNodeNotAvail's names the nodes after a comma)."""
    code, _, detail = reason.partition(",")
    words = WAITING.get(code) or next((f"{limit} is reached" for prefix, limit in LIMITS.items()
                                       if code.startswith(prefix) and "Limit" in code), "")
    return f"{words} (squeue: {reason.strip()})" if words else f"squeue says {reason.strip()}"


def _cause(state: str, reason: str, requeues: int) -> str:
    """Why the job waits or was started again: squeue's reason, SLURM's restart count."""
    again = f"requeued {requeues} time{'s' if requeues != 1 else ''}, attempt {requeues + 1}" if requeues else ""
    if state == "PENDING" and reason not in ("", "None"):
        return f"waiting: {_waiting(reason)}" + (f"; {again}" if again else "")
    return again if state in ACTIVE else ""


def _status(job: dict, now: float, requeues: int = 0) -> JobStatus:
    state = job["state"].split()[0] if job["state"] else "UNKNOWN"
    status = JobStatus(name=job["name"], kind="SLURM", phase=PHASES.get(state, job_status.UNKNOWN),
                       queue=f"job {job['id']}: {state}" + (f" ({job['reason']})" if job.get("reason") not in
                                                            (None, "", "None") else ""))
    if job.get("exit_code") and status.phase == FAILED:
        status.reason = _exit(job["exit_code"])
    status.cause = _cause(state, job.get("reason") or "", requeues)
    script = Path(job["script"]) if job.get("script") else None
    flags = _flags(script) if script else {}
    if "--checkpoint-dir" in flags:
        directory = Path(job.get("workdir") or ".") / flags["--checkpoint-dir"]
        directory = directory / flags["--run-name"] if "--run-name" in flags else directory
        job_status.apply_records(status, iter_records(directory / outputs.METRICS), now)
        newest = outputs.newest_checkpoint(directory)
        if newest:
            status.checkpoint_step, status.checkpoint_age_seconds = newest[0], max(now - newest[1], 0.0)
        summary = outputs.read_summary(directory)
        if summary:
            status.result = outputs.result_line(summary)
        status.results = str(directory)
    if requeues:
        status.restarts = max(status.restarts or 0, requeues)
    return status


def _job_number(job: dict) -> int:
    """The job's number (an array task's id is NUMBER_TASK), 0 where it has none; not isdigit(): int('²') fails."""
    return parse_count(job["id"].split("_")[0]) or 0


def _find(name: str) -> dict:
    queued = _queued(name)
    if queued:
        return max(queued, key=_job_number)
    done = _accounted(name)
    if done:
        return done[-1]
    raise UserError(f"{name}: no SLURM job by that name in the queue or the accounting (jaxgen list --slurm)")


def status(name: str) -> JobStatus:
    job = _find(name)
    requeues = _requeues(job["id"]) if job.get("state", "").split(" ")[0] in ACTIVE else {}
    return _status(job, time.time(), requeues.get(job["id"], 0))


def jobs() -> list[JobStatus]:
    now, queued = time.time(), _queued()
    requeues = _requeues() if any(job["state"] in ACTIVE for job in queued) else {}
    return [_status(job, now, requeues.get(job["id"], 0)) for job in queued]


def logs(name: str, rank: int, follow: bool, echo, poll: float = 1.0) -> int:
    """Rank `rank`'s lines of the job's output file (sbatch --output); with `follow`, until it leaves the queue."""
    job = _find(name)
    out = _run("scontrol", "show", "job", job["id"], "-o") if job.get("script") else ""
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    path = Path(fields.get("StdOut", ""))
    if not fields.get("StdOut"):
        raise UserError(f"{name}: its output file is not known to SLURM any more (job {job['id']} has left the queue)")
    prefix, position = f"Rank {rank}:", 0
    while True:
        running = follow and any(j["id"] == job["id"] and j["state"] in ACTIVE for j in _queued(name))
        try:
            with open(path) as f:
                f.seek(position)
                for line in f:
                    if line.startswith(prefix) or "Rank " not in line[:12]:
                        echo(line, nl=False)
                position = f.tell()
        except OSError:
            pass
        if not running:
            return 0
        time.sleep(poll)
