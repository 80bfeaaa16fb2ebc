"""Rank-tagged log lines, the metrics JSONL file and the TTY-only progress bar."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


class Logger:
    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, message: str) -> None:
        print(f"Rank {self.rank}: {message}", flush=True)


class MetricsFile:
    """Appends one JSON object per line; written by process 0 only (None path = disabled)."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict) -> None:
        if not self.path:
            return
        record = {"time": round(time.time(), 3), **record}
        with open(self.path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()


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

