"""A local run taken into its job's folder (runs.py): what process 0 wrote copied into a run folder of
its own, <outputs>/<name>/<run id>, with its processes' logs and its record, as scripts/run.sh keeps a
cluster run's; a link it left is never followed (confined.py)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer import outputs

from ..errors import UserError
from . import confined, runs


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
    a link is never followed (confined.py). Returns whether this run's summary is there, and what was
    left out (links, devices…) by relative path."""
    if source is None or not source.is_dir() or not _written_since(source, since):
        staging.mkdir(parents=True)
        return False, []  # refused or stopped before it wrote anything: nothing here is this run's
    stale = [outputs.SUMMARY] if (source / outputs.SUMMARY).exists() and \
        (source / outputs.SUMMARY).stat().st_mtime < since else []
    dropped = confined.copy_tree(source, staging, skip=(*outputs.RESTART_STATE, *stale))
    return (staging / outputs.SUMMARY).exists(), dropped


def finished_before(source: Path | None, since: float) -> bool:
    """Whether a run that ended well trained nothing because its job had already finished: the summary
    and the metrics in its outputs (a claim's) are an earlier run's, untouched since this run began."""
    try:
        return source is not None and all((source / f).stat().st_mtime < since
                                          for f in (outputs.SUMMARY, outputs.METRICS))
    except OSError:
        return False


@dataclass
class RunRecord:
    """One run of a job kept in <outputs>/<name>/<run_id>/ (runs.py)."""

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

    def keep(self, source: Path | None, name: str, status: str, code: int, **facts) -> tuple[bool, list[str]]:
        """Take this run in: what it wrote in `source` (process 0's outputs), its logs and its record
        (status, exit code, times and `facts`), renamed into place at once. Returns whether its summary
        is there, and what the copy left out."""
        staging = self.folder / f".{self.run_id}.collecting"
        try:
            summarised, dropped = collect(source, staging, self.started)
            if self.log_dir.is_dir():  # its processes' logs, every attempt's, a failed run's too
                os.rename(self.log_dir, staging / runs.LOGS)
            ended = time.time()  # a record's date; the wall time is measured on the monotonic clock
            runs.write_record(staging, {"run_id": self.run_id, "name": name, "status": status, "exit_code": code,
                                        "started": round(self.started, 3), "ended": round(ended, 3),
                                        "wall_seconds": round(time.monotonic() - self.clock, 1), **facts})
            os.rename(staging, self.path)
        except OSError as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise UserError(f"--outputs {self.folder.parent}: cannot keep the run's results: "
                            f"{error.strerror or error}") from None
        return summarised, dropped
