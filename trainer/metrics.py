"""Rank-tagged log lines, the metrics JSONL file and the TTY-only progress bar."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from trainer.errors import CheckpointError, write_stdout


class Logger:
    """`log(message)` from every process (its start, warnings, errors); `log.progress(message)` from
    process 0 only, as progress and metrics are the same on every process."""

    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, message: str) -> None:
        write_stdout(f"Rank {self.rank}: {message}\n")

    def progress(self, message: str) -> None:
        if self.rank == 0:
            self(message)


class Pace:
    """Throughput and time to go of one attempt, from its first completed chunk of steps on (the
    compile time of the first one is left out, as is a resume's skipped work)."""

    def __init__(self, total_steps: int, examples_per_step: int, clock=time.monotonic):
        self.total, self.examples_per_step, self.clock = total_steps, examples_per_step, clock
        self.step = 0
        self._first: tuple[float, int] | None = None  # (clock, step) at this attempt's first chunk

    def stepped(self, step: int) -> None:
        """A chunk of steps completed, up to global step `step`."""
        if self._first is None:
            self._first = (self.clock(), step)
        self.step = step

    def steps_per_second(self) -> float | None:
        if self._first is None or self.step <= self._first[1]:
            return None
        elapsed = self.clock() - self._first[0]
        return (self.step - self._first[1]) / elapsed if elapsed > 0 else None

    def examples_per_second(self) -> float | None:
        rate = self.steps_per_second()
        return None if rate is None else rate * self.examples_per_step

    def remaining_seconds(self) -> float | None:
        """Seconds to the last step at the pace so far; None until two chunks have completed."""
        if self.step >= self.total:
            return 0.0
        rate = self.steps_per_second()
        return None if rate is None else (self.total - self.step) / rate

    def record(self) -> dict:
        """The figures for a metrics.jsonl step record (those known so far)."""
        rate, remaining = self.examples_per_second(), self.remaining_seconds()
        return {**({"examples_per_second": round(rate, 1)} if rate is not None else {}),
                **({"eta_seconds": round(remaining, 1)} if remaining is not None else {})}

    def describe(self) -> str:
        """`step 96/320, 5120 examples/s, ETA 0:01:23` (the rate and ETA once they are known)."""
        parts = [f"step {self.step}/{self.total}"]
        rate, remaining = self.examples_per_second(), self.remaining_seconds()
        if rate is not None:
            parts.append(f"{rate:.0f} examples/s")
        parts.append(f"ETA {format_duration(remaining)}" if remaining is not None else "ETA unknown")
        return ", ".join(parts)


def format_duration(seconds: float) -> str:
    """H:MM:SS, as tqdm and `sky status` print a time to go."""
    minutes, secs = divmod(max(round(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class MetricsFile:
    """Appends one JSON object per line; written by process 0 only (None path = disabled).
    on_record(record), when given, sees every record after it is written, with or without a path."""

    def __init__(self, path: str | os.PathLike | None, on_record=None):
        self.path = Path(path) if path else None
        self.on_record = on_record
        if self.path:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise CheckpointError(f"cannot write the metrics to {self.path}: {e.strerror or e}") from None

    def write(self, record: dict) -> None:
        record = {"time": round(time.time(), 3), **record}
        if self.path:
            self._append(record)
        if self.on_record:
            self.on_record(record)

    def _append(self, record: dict) -> None:
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")
                f.flush()
        except OSError as e:  # a full or read-only volume: as a checkpoint that cannot be written
            raise CheckpointError(f"cannot write the metrics to {self.path}: {e.strerror or e}") from None


def progress(total: int, desc: str, enabled: bool):
    """A tqdm bar when stdout is a terminal, otherwise None (log lines carry the progress)."""
    if not (enabled and sys.stdout.isatty()):
        return None
    import shutil

    from tqdm import tqdm

    # shutil falls back to 80x24 where a terminal reports a size of 0 (fresh ptys), in which case
    # tqdm would draw nothing.
    size = shutil.get_terminal_size()
    return tqdm(total=total, desc=desc, leave=False, ncols=size.columns, nrows=size.lines, file=sys.stdout)

