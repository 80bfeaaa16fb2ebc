"""Checkpoint writes off the step path: the step loop hands a host copy of the state to one worker
thread, which serializes, fsyncs and renames it into place (trainer/checkpoint.py), and uploads it
to the job's bucket when it has one (trainer/bucket.py), while the next steps run.

At most one write is in flight: a new save first waits for the previous one. A finished write is
reported on the main thread, at the next step boundary, save or end: its log line and metrics record,
or its CheckpointError, raised there as if the save had failed in place (one line, the checkpoint exit
code). Closing waits for the write in flight, so a stop signal's save and the final save are on disk
before the process exits.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer import checkpoint
from trainer.config import ephemeral_outputs


# How long a failing run waits for the write in flight before it exits anyway.
ABANDON_TIMEOUT = 60.0


@dataclass
class _Write:
    step: int
    started: float  # perf_counter() when the save began (before waiting for the previous one)
    started_at: float  # the same moment as time.time(), for the metrics record
    waited: float  # seconds the save waited for the previous write
    blocked: float  # seconds the step loop spent in the save (the wait and the host copy included)
    future: Future


class CheckpointWriter:
    """Writes the checkpoints of one directory on a background thread; `directory` None writes
    nothing (processes other than 0, runs without --checkpoint-dir). `metrics`: a MetricsFile for
    the checkpoint records; `before_rename(step)`: a test hook run on the worker thread once the
    temporary file is written."""

    def __init__(self, directory: str | Path | None, fingerprint: dict, log, metrics=None, before_rename=None):
        self.directory = Path(directory) if directory else None
        self.fingerprint = fingerprint
        self.log = log
        self.metrics = metrics
        self.before_rename = before_rename
        self.bucket = None  # a trainer.bucket.Bucket: each checkpoint is uploaded there once written
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-writer") if self.directory else None
        self._pending: _Write | None = None

    def begin(self) -> float:
        """Start a save: wait until no write is in flight. Returns the perf_counter() start."""
        started = time.perf_counter()
        self._started_at = time.time()
        self._waited = self.wait()
        return started

    def submit(self, step: int, leaves: list[np.ndarray], names: list[str], started: float) -> None:
        """Queue the write of `leaves` (host arrays the caller no longer changes), after begin()."""
        if not self._pool:
            return
        future = self._pool.submit(self._write, step, leaves, names)
        self._pending = _Write(step, started, self._started_at, self._waited, time.perf_counter() - started, future)

    def _write(self, step: int, leaves: list[np.ndarray], names: list[str]) -> tuple[Path, float, float]:
        began = time.perf_counter()
        path = checkpoint.save(self.directory, step, leaves, self.fingerprint, names, self.before_rename)
        if self.bucket:
            self.bucket.upload_checkpoint(self.directory.parent, path, step)
        done = time.perf_counter()
        return path, done - began, done

    def poll(self) -> None:
        """Report the write in flight if it has finished (raising its error); never blocks."""
        if self._pending and self._pending.future.done():
            self._finish()

    def wait(self) -> float:
        """Block until no write is in flight, report it; returns the seconds waited."""
        if not self._pending:
            return 0.0
        began = time.perf_counter()
        self._pending.future.exception()  # waits; the error itself is raised by _finish
        waited = time.perf_counter() - began
        self._finish()
        return waited

    def _finish(self) -> None:
        pending, self._pending = self._pending, None
        path, written, done = pending.future.result()  # a CheckpointError of the write is raised here
        # The total (the time a stop signal's save needs: it must fit in the pod's termination grace
        # period), then what the step loop paid for it.
        where = (f"{path}, uploaded to {self.bucket.uri}" if self.bucket else
                 f"{Path(path).name} in this process's scratch folder, removed when the run ends"
                 if ephemeral_outputs() else path)
        self.log(f"checkpoint saved at step {pending.step}: {where} ({done - pending.started:.2f} s); "
                 f"the step loop was blocked {pending.blocked:.3f} s, the write took {written:.2f} s")
        if self.metrics:
            self.metrics.write({"event": "checkpoint", "step": pending.step, "started": round(pending.started_at, 3),
                                "blocked_seconds": round(pending.blocked, 6),
                                "waited_seconds": round(pending.waited, 6), "write_seconds": round(written, 6)})

    def close(self) -> None:
        """Wait for the write in flight (raising its error) and stop the worker thread."""
        try:
            self.wait()
        finally:
            if self._pool:
                self._pool.shutdown(wait=True)
                self._pool = None

    def abandon(self, timeout: float = ABANDON_TIMEOUT) -> None:
        """On the way out of a failed run: let the write in flight finish (its checkpoint is a
        consistent state a restart resumes from), logging rather than raising its own error, which
        would hide the one the run fails with. A write still running after `timeout` seconds (a hung
        filesystem) is left behind, so the run's own error is still reported and the process exits."""
        pending = self._pending
        if pending and not pending.future.done():
            try:
                pending.future.exception(timeout=timeout)
            except TimeoutError:
                self.log(f"the checkpoint write of step {pending.step} did not finish in {timeout:.0f} s; "
                         "leaving it (the previous checkpoint is intact)")
                self._pending = None
                self._pool.shutdown(wait=False)
                self._pool = None
                return
        try:
            self.close()
        except Exception as e:  # noqa: BLE001  (a CheckpointError, or worse: the run's error comes first)
            self.log(f"the checkpoint write in flight failed too: {e}")
