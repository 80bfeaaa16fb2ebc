"""Rank-tagged log lines, the metrics JSONL file and the TTY-only progress bar."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from trainer.errors import CheckpointError


class Logger:
    """`log(message)` from every process (its start, warnings, errors); `log.progress(message)` from
    process 0 only, as progress and metrics are the same on every process."""

    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, message: str) -> None:
        print(f"Rank {self.rank}: {message}", flush=True)

    def progress(self, message: str) -> None:
        if self.rank == 0:
            self(message)


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

