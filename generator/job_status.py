"""What `jaxgen status` and `jaxgen list` show of a job, whatever runs it: one JobStatus, filled by an
engine (generator/engines/*/jobs.py, generator/runstore/local.py) from what the target already has, and
printed as text or JSON. The training figures come from one of three places, read here: the
trainer's Prometheus series (trainer/monitoring.py), its metrics.jsonl records (trainer/metrics.py)
or a TrainJob's status.trainerStatus (trainer/trainjob_status.py)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable

from trainer import outputs
from trainer.metrics import format_duration

from .errors import printable

# Phases, as Kubernetes and SLURM users know them.
QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED, UNKNOWN = (
    "Queued", "Pending", "Running", "Succeeded", "Failed", "Stopped", "Unknown")
FINISHED = (SUCCEEDED, FAILED)


@dataclass
class JobStatus:
    name: str
    kind: str  # a target's kind (generator/targets.py), SLURM or local
    phase: str = UNKNOWN
    reason: str = ""  # why it is in this phase, when there is more to say (a failure, a stop)
    cause: str = ""  # why it waits or restarts, one line (engines/kubernetes/causes.py, engines/slurm/jobs.py)
    step: int | None = None
    total_steps: int | None = None
    percent: int | None = None  # where only a percentage is known (a TrainJob's trainerStatus)
    epoch: int | None = None
    eta_seconds: float | None = None
    loss: float | None = None
    test_accuracy: float | None = None
    checkpoint_step: int | None = None
    checkpoint_age_seconds: float | None = None
    restarts: int | None = None
    queue: str = ""  # Kueue: "admitted by ClusterQueue X", "pending: <reason>"; SLURM: the job's state
    pods: str = ""  # "2/2 running"
    nodes: list[str] = field(default_factory=list)  # a lost node of the job's pods, its ranks and what the job waits for
    result: str = ""  # the result line of a finished run
    results: str = ""  # where the results are
    age_seconds: float | None = None
    source: str = ""  # where the training figures were read
    extra: dict = field(default_factory=dict)

    def progress(self) -> str:
        if self.step is None:
            return "-" if self.percent is None else f"{self.percent}%"
        if not self.total_steps:
            return f"step {self.step}"
        return f"{self.step}/{self.total_steps} ({100 * self.step // self.total_steps}%)"

    def eta(self) -> str:
        if self.phase in FINISHED or self.eta_seconds is None:
            return "-"
        return format_duration(self.eta_seconds)

    def as_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", {}, [])}

    def lines(self) -> list[str]:
        """The text of `jaxgen status`."""
        rows = [("name", f"{self.name} ({self.kind})"),
                ("phase", self.phase + (f": {self.reason}" if self.reason else "")), ("cause", self.cause),
                ("queue", self.queue), ("pods", self.pods), *(("node", line) for line in self.nodes)]
        if self.step is not None or self.percent is not None:
            progress = f"step {self.progress()}" if self.total_steps else self.progress()
            if self.epoch:
                progress += f", epoch {self.epoch}"
            if self.phase not in FINISHED:
                progress += f", ETA {self.eta() if self.eta_seconds is not None else 'unknown'}"
            rows.append(("progress", progress))
        figures = [f"loss {self.loss:.4f}" if self.loss is not None else "",
                   f"test accuracy {self.test_accuracy:.4f}" if self.test_accuracy is not None else ""]
        rows.append(("last", ", ".join(f for f in figures if f)))
        if self.checkpoint_step:
            age = (f", {format_duration(self.checkpoint_age_seconds)} ago"
                   if self.checkpoint_age_seconds is not None else "")
            rows.append(("checkpoint", f"step {self.checkpoint_step}{age}"))
        rows += [("restarts", "" if self.restarts is None else str(self.restarts)), ("result", self.result),
                 ("results", self.results)]
        return [printable(f"{label + ':':12}{value}") for label, value in rows if value]


def strict_json(value) -> str:
    """`jaxgen status|list -o json`: JSON that every parser takes. A number that JSON has no word
    for (a diverged run's NaN loss, an infinite one) is null."""
    def finite(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        return [finite(x) for x in v] if isinstance(v, (list, tuple)) else v

    return json.dumps(finite(value), sort_keys=True, allow_nan=False)


CAUSE_WIDTH = 72  # characters of a cause line in `jaxgen list` (status prints it whole)


def short_cause(line: str) -> str:
    return line if len(line) <= CAUSE_WIDTH else line[:CAUSE_WIDTH - 1].rstrip() + "…"


def table(jobs: list[JobStatus]) -> list[str]:
    """The text of `jaxgen list`: one row per job, and a CAUSE column where a job waits or restarts."""
    causes = any(j.cause for j in jobs)
    rows = [("NAME", "KIND", "PHASE", "PROGRESS", "ETA", "AGE", *(("CAUSE",) if causes else ()))]
    rows += [(printable(j.name), j.kind, j.phase, j.progress(), j.eta(),
              format_duration(j.age_seconds) if j.age_seconds is not None else "-",
              *((printable(short_cause(j.cause)) or "-",) if causes else ())) for j in jobs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def apply_series(status: JobStatus, series: dict[str, float]) -> None:
    """The trainer's Prometheus series (name without the jax_training_ prefix -> value)."""
    get = lambda name: _finite(series.get(name))  # noqa: E731
    as_int = lambda name: None if get(name) is None else int(get(name))  # noqa: E731
    status.step, status.total_steps, status.epoch = as_int("step"), as_int("total_steps"), as_int("epoch") or None
    status.loss, status.test_accuracy = get("loss"), get("test_accuracy_ratio")
    status.eta_seconds = get("estimated_remaining_seconds")
    status.checkpoint_step = as_int("last_checkpoint_step") or None
    status.checkpoint_age_seconds = get("last_checkpoint_age_seconds")
    if as_int("restarts") is not None:
        status.restarts = max(status.restarts or 0, as_int("restarts"))
    status.source = "metrics endpoint"


def apply_trainer_status(status: JobStatus, trainer_status: dict) -> None:
    """A TrainJob's status.trainerStatus (progress percentage, remaining seconds, metrics)."""
    metrics = {m.get("name"): m.get("value") for m in trainer_status.get("metrics") or []}

    def number(name):
        try:
            return float(metrics[name])
        except (KeyError, TypeError, ValueError):
            return None

    if "estimatedRemainingSeconds" in trainer_status:
        status.eta_seconds = float(trainer_status["estimatedRemainingSeconds"])
    if "progressPercentage" in trainer_status:
        status.percent = int(trainer_status["progressPercentage"])
    epoch = number("epoch")
    status.epoch = status.epoch or (int(epoch) if epoch else None)
    status.loss = status.loss if status.loss is not None else number("loss")
    status.test_accuracy = status.test_accuracy if status.test_accuracy is not None else number("test_accuracy")
    status.source = status.source or "TrainJob status"


def apply_records(status: JobStatus, records: Iterable[dict],
                  now: float | None = None) -> tuple[dict | None, dict | None]:
    """A run's metrics.jsonl records (start, step, epoch, end, preempted), read in one pass as they
    come (trainer/results.py iter_records), keeping none but the last of a kind. Returns the first
    start record with a time and the last record (None and None without any)."""
    now = time.time() if now is None else now
    starts, first, last, last_step = 0, None, None, None
    for record in records:
        event = record.get("event")
        if event == "start":
            starts += 1
            status.total_steps = record.get("total_steps")
            first = first or (record if record.get("time") else None)
        if event in ("start", "step", "epoch", "end", "preempted") and "step" in record:
            status.step = record["step"]
        if event in ("step", "epoch"):
            status.epoch = record.get("epoch", status.epoch)
            status.loss = record.get("loss", status.loss)
        if event == "epoch":
            status.test_accuracy = record.get("test_accuracy")
        if event == "step":
            last_step = record
        last = record
    if starts:
        status.restarts = starts - 1
    if last_step and "eta_seconds" in last_step and last.get("event") not in ("end", "preempted"):
        status.eta_seconds = max(last_step["eta_seconds"] - max(now - last_step.get("time", now), 0.0), 0.0)
    status.source = status.source or outputs.METRICS
    return first, last


def parse_series(text: str, prefix: str = "jax_training_") -> dict[str, float]:
    """Prometheus text exposition -> {name without prefix: value} of the unlabelled samples."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(prefix) and not sample.labels:
                found[sample.name[len(prefix):]] = sample.value
    return found
