"""Goodput: a run's wall time split into productive training and named losses, from its own metrics
records (every attempt's), with no service behind it. Definitions: docs/goodput.md. The names are
those of ml-goodput-measurement's BadputType where one fits (lower case), else our own.

Standard library only: `jaxgen results` and the Prometheus exporter read it too.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from array import array
from dataclasses import dataclass, field
from typing import Iterable, Iterator

# Each kind of loss and what it is (docs/goodput.md says how each is measured).
BADPUT = {
    "program_startup": "process start to the trainer's imports done (interpreter, jax, the trainer)",
    "data_loading": "waiting for the data set after the imports (reading, checking, decompressing)",
    "accelerator_initialization": "joining the coordinator and the other processes, creating the backend",
    "unproductive_checkpoint_restore_time": "reading the newest checkpoint and sending it to every process",
    "training_prep": "building the model and optimizer, putting state and data on the devices, "
                     "compiling the step (the first steps' time beyond the ideal step time)",
    "unproductive_checkpoint_save_time": "the step loop blocked by checkpoint saves, and the final save",
    "evaluation": "scoring the test set after each epoch",
    "wasted_progress_from_disruption": "steps trained again after a restart (done after the checkpoint the "
                                       "next attempt resumed from)",
    "infrastructure_recovery_from_disruption": "from an attempt's last record to the next attempt's process start: "
                                               "the failure's detection, the restart, waiting to be scheduled "
                                               "or re-admitted",
    "other": "the rest: logging, records, what no category above names",
}
# The start-up phases the trainer measures itself, in the start record's "phases" (seconds).
PHASES = ("program_startup", "data_loading", "accelerator_initialization", "unproductive_checkpoint_restore_time",
          "training_prep")

LAUNCHED_ENV = "JAX_TRAINING_LAUNCHED"  # the process's start (epoch seconds), passed on by a supervisor


def launched() -> float:
    """When this process (or the supervisor that started it) began, in epoch seconds."""
    if os.environ.get(LAUNCHED_ENV):
        return float(os.environ[LAUNCHED_ENV])
    try:  # the process's start in clock ticks since boot (Linux), to within a tick (10 ms)
        ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - max(age, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED


_IMPORTED = time.time()


@dataclass
class _Attempt:
    """What the accounting of one attempt needs from all of its records, read ahead in a first pass."""
    start: dict  # its start record
    last_time: float  # its last record's time
    last_step: int  # the most steps any of its records counts
    saves: list = field(default_factory=list)  # (started, blocked seconds) of each checkpoint save


def _timed(records: Iterable[dict]) -> Iterator[dict]:
    """The records with a time, from the first start record on (none come before one); a start record
    without the step it starts from (no trainer's) is none."""
    begun = False
    for record in records:
        starts = record.get("event") == "start"
        if isinstance(record.get("time"), (int, float)) and not (starts and not isinstance(record.get("step"), int)):
            begun = begun or record.get("event") == "start"
            if begun:
                yield record


def _read_ahead(records: Iterable[dict]) -> tuple[list[_Attempt], float | None]:
    """The attempts (each start record opens one) and the ideal step time: the median over every
    attempt of the seconds per step between consecutive step records of one epoch, leaving out each
    attempt's first (it holds the compilation). A run with fewer step records (a short epoch, a large
    --log-every) falls back to its fastest epoch's seconds per step, which may hold the compilation.
    Of the records, only these are kept: the rates as numbers, and each attempt's saves."""
    attempts: list[_Attempt] = []
    rates, epochs = array("d"), []
    for record in _timed(records):
        event, step = record.get("event"), record.get("step")
        if event == "start":
            attempts.append(_Attempt(record, record["time"], record["step"]))
            steps, last = 0, None  # the attempt's step records so far, and the last of them
        current = attempts[-1]
        current.last_time = record["time"]
        if isinstance(step, int):
            current.last_step = max(current.last_step, step)
        if event == "checkpoint":
            current.saves.append((record.get("started", record["time"]), max(record.get("blocked_seconds", 0.0), 0.0)))
        elif event == "step":
            if steps >= 2 and last.get("epoch") == record.get("epoch") and record["step"] > last["step"] \
                    and record["time"] >= last["time"]:
                rates.append((record["time"] - last["time"]) / (record["step"] - last["step"]))
            steps, last = steps + 1, record
        elif event == "epoch" and record.get("batches") and isinstance(record.get("seconds"), (int, float)):
            epochs.append(max(record["seconds"], 0.0) / record["batches"])
    ideal = statistics.median(rates) if rates else min(epochs) if epochs else None
    return attempts, ideal


def _blocked(saves: list[tuple[float, float]], begin: float, end: float) -> float:
    """The seconds the step loop was blocked by the saves that started in [begin, end)."""
    return sum(blocked for started, blocked in saves if begin <= started < end)


def account(records: Iterable[dict]) -> dict | None:
    """The goodput of the run whose metrics records are `records`: wall seconds from the first
    process start to the last record, productive seconds (the measured time of the steps kept), the
    seconds of each kind of loss (BADPUT), their ratios. None without a start record.

    `records` is read twice, a record at a time (a list, or trainer/results.py's Records, which reads
    the file again each time): first for what each attempt needs ahead of its records (its saves, the
    step the next attempt resumes from), then to measure; no record is held beyond the one before.

    Every second between two records goes to one kind only, so the parts never add up to more than
    the wall time: a step's time is measured between the records around it (less the saves that
    blocked it), not estimated from the ideal step time, which only splits the compilation off an
    attempt's first steps."""
    attempts, ideal = _read_ahead(records)
    if not attempts:
        return None
    ideal = ideal or 0.0
    lost = dict.fromkeys(BADPUT, 0.0)
    productive = 0.0
    redone = 0
    index = -1
    for record in _timed(records):
        event = record.get("event")
        if event == "start":
            index += 1
            attempt, start = attempts[index], record
            for phase, seconds in (start.get("phases") or {}).items():
                if phase in lost:
                    lost[phase] += max(seconds, 0.0)
            following = attempts[index + 1] if index + 1 < len(attempts) else None
            kept_until = following.start["step"] if following else math.inf  # steps after it are trained again
            lost["unproductive_checkpoint_save_time"] += sum(blocked for _, blocked in attempt.saves)
            if following:
                redone += max(attempt.last_step - following.start["step"], 0)
                lost["infrastructure_recovery_from_disruption"] += max(
                    following.start.get("launched", following.start["time"]) - attempt.last_time, 0.0)
            mark, first = start, True  # the last record with a step count, and whether no step came yet
            continue
        closing = max(record.get("save_seconds", 0.0), 0.0) if event in ("end", "preempted") else 0.0
        lost["unproductive_checkpoint_save_time"] += closing
        if event not in ("step", "epoch", "end", "preempted") or not isinstance(record.get("step"), int):
            continue
        # A stop's record also closes the steps since the last step record (a stop saves the exact step).
        seconds = max(record["time"] - mark["time"] - _blocked(attempt.saves, mark["time"], record["time"]) - closing,
                      0.0)
        steps = record["step"] - mark["step"]
        if event == "epoch" and mark.get("event") == "step":
            lost["evaluation"] += seconds
        elif steps > 0:
            if first:  # the first steps' time beyond the ideal: compilation
                compiling = max(seconds - steps * ideal, 0.0)
                lost["training_prep"] += compiling
                seconds -= compiling
            again = min(max(record["step"] - max(mark["step"], kept_until), 0), steps)
            productive += seconds * (steps - again) / steps
            lost["wasted_progress_from_disruption"] += seconds * again / steps
            first = False
        mark = record
    # Each part is measured between records and never below 0; a wall clock stepped back between the
    # records shortens the wall time from their times alone (below 0 too): it is at least the parts'
    # sum, so the goodput is at most 1.
    measured = productive + sum(v for k, v in lost.items() if k != "other")
    wall = max(attempts[-1].last_time - attempts[0].start.get("launched", attempts[0].start["time"]), measured)
    lost["other"] = wall - measured
    ratio = (lambda seconds: round(seconds / wall, 4) if wall > 0 else None)
    return {
        "goodput": ratio(productive),
        "wall_seconds": round(wall, 3),
        "productive_seconds": round(productive, 3),
        "step_seconds": round(ideal, 6),
        "steps_redone": redone,
        "badput_seconds": {k: round(v, 3) for k, v in lost.items()},
        "badput": {k: ratio(v) for k, v in lost.items()},
    }


SHORT = {"program_startup": "start-up", "data_loading": "data", "accelerator_initialization": "init",
         "unproductive_checkpoint_restore_time": "restore", "training_prep": "prep and compile",
         "unproductive_checkpoint_save_time": "checkpoint save", "evaluation": "evaluation",
         "wasted_progress_from_disruption": "redone", "infrastructure_recovery_from_disruption": "recovery",
         "other": "other"}


def line(goodput) -> str | None:
    """One line: the goodput and its losses, the largest first (those under 0.05 s left out); None
    when `goodput` is not an account as account() makes it (a summary edited or written elsewhere)."""
    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    lost = goodput.get("badput_seconds") if isinstance(goodput, dict) else None
    if not (isinstance(lost, dict) and number(goodput.get("goodput")) and number(goodput.get("wall_seconds"))
            and all(k in SHORT and number(s) for k, s in lost.items())):
        return None
    losses = sorted(((s, k) for k, s in goodput["badput_seconds"].items() if s >= 0.05), reverse=True)
    parts = ", ".join(f"{SHORT[k]} {s:.1f} s" for s, k in losses)
    return (f"{goodput['goodput']:.3f} of {goodput['wall_seconds']:.1f} s"
            + (f" (lost: {parts})" if parts else ""))
