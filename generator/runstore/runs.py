"""A job's history of runs: `<outputs>/<name>/`, where no run replaces another.

    <run-id>/         one run's results (model, metrics, summary, curves) and its record; a run id is
                      its UTC start time + a random suffix (20261125T170102.345Z-3f9a): names sort by time
    latest            a relative symlink to the newest run that finished (`latest/model` is its model);
                      read only through latest(), which accepts nothing but a run id beside it
    .lock             held (fcntl.flock) by the `jaxgen run` of the job while it runs, and by its
                      processes (they inherit it): a killed jaxgen's leftovers still hold it

A run's record, RECORD, says how it ended (finished, failed, stopped) and its exit code; a run that
fails leaves only its own folder behind, and `latest` still names the last good one. Its "sequence",
one more than the job's runs before it (written under the job's lock), orders the runs: a run id
comes from the wall clock, which may step back between two runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from trainer import outputs

from ..errors import UserError

DEFAULT_OUTPUTS = "jax-training-outputs"  # where `jaxgen run` keeps results, and status --local reads them

RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{4}")  # as new_run_id writes it: ASCII digits, not \d
LATEST = "latest"
LOGS = "logs"  # a run folder's logs of its processes (rank-<i>.log, every attempt's), `jaxgen logs --local`
LOCK = ".lock"
RECORD = "jaxgen-run.json"
BUSY = 75  # EX_TEMPFAIL: the job is already running; try again when it has ended


class JobBusy(UserError):
    """Another `jaxgen run` of the job holds its lock."""

    exit_code = BUSY


def new_run_id(now: float | None = None) -> str:
    now = time.time() if now is None else now
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}.{int(now % 1 * 1000):03d}Z-{secrets.token_hex(2)}"


@contextmanager
def locked(folder: Path, name: str):
    """Hold the job's lock for the block, or refuse at once when another run of the job holds it.
    Yields the lock's descriptor: a process that inherits it holds the lock until it ends too (the
    lock is the open file's, released when its last descriptor closes)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise UserError(f"{folder}: cannot keep the job's results there: {error.strerror or error}") from None
    try:
        if not _take(fd):
            holder = os.pread(fd, 64, 0).decode(errors="replace").split("\n", 1)[0].strip() or "?"
            if holder.isascii() and holder.isdigit() and not _alive(int(holder)):
                left = _holders(folder / LOCK)
                raise JobBusy(f"job {name!r} is still running: its jaxgen (pid {holder}) is gone, and processes it "
                              f"started hold the job's lock (pid {', '.join(map(str, left)) or '?'}, results in "
                              f"{folder}); wait for them to end or stop them") from None
            raise JobBusy(f"job {name!r} is already running (jaxgen pid {holder}, results in {folder}); wait for "
                          f"it to end, or run this one under another name (--set name=...)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)  # releases the lock, unless a process started in the block holds it still


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return True


def _holders(lock: Path, most: int = 8) -> list[int]:
    """Up to `most` pids of this user's processes that have `lock` open (Linux /proc; none elsewhere)."""
    found = []
    try:
        lock_id = (lock.stat().st_dev, lock.stat().st_ino)
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isascii() and p.isdigit() and int(p) != os.getpid())
    except OSError:
        return found
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == lock_id:
                found.append(pid)
                break
        if len(found) >= most:
            break
    return found


def _take(fd: int) -> bool:
    """The lock, or False when a run holds it. running()'s look holds it shared for an instant: a
    start that meets it tries again for a moment instead of refusing."""
    for _ in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.01)
    return False


def note_outputs(folder: Path, live: Path | None) -> None:
    """Write where the running run's process 0 writes its outputs now under the lock's pid, for
    `jaxgen status|list --local` to follow it before the run is kept."""
    if live is None:
        return
    fd = os.open(folder / LOCK, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{live}\n".encode(), 0)
    finally:
        os.close(fd)


def running(folder: Path) -> str | None:
    """None when no run of the job holds its lock, else where its process 0 writes its outputs now
    (note_outputs), or "" until it is known."""
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            lines = os.pread(fd, 4096, 0).decode(errors="replace").splitlines()
            return lines[1] if len(lines) > 1 else ""
        return None
    finally:
        os.close(fd)  # releases a shared lock taken


def latest(folder: Path) -> Path | None:
    """The run `latest` names, or None. Only a run id of this folder is followed, never a path."""
    try:
        target = os.readlink(folder / LATEST)
    except OSError:
        return None
    run = folder / target
    return run if RUN_ID.fullmatch(target) and run.is_dir() and not run.is_symlink() else None


def set_latest(folder: Path, run_id: str) -> None:
    """Point `latest` at run_id: a new relative symlink renamed over the old one (atomic)."""
    tmp = folder / f".{LATEST}.{run_id}"
    try:
        tmp.unlink(missing_ok=True)
        os.symlink(run_id, tmp)
        os.replace(tmp, folder / LATEST)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{folder / LATEST}: cannot point it at {run_id}: {error.strerror or error}") from None


def runs(folder: Path) -> list[Path]:
    """The job's runs, oldest first: by their records' sequence (runs kept before there was one first),
    then by id."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if RUN_ID.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]
    return sorted(found, key=lambda run: (_sequence(read_record(run)), run.name))


def _sequence(record: dict) -> int:
    number = record.get("sequence")
    return number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else 0


def is_job_folder(path: Path) -> bool:
    return bool(runs(path)) or (path / LOCK).exists()


def write_record(run: Path, record: dict, folder: Path | None = None) -> None:
    """The run's record; one without a sequence gets the next of the job folder (`folder`, by default
    the one `run` is in: its staging name is a hidden one there)."""
    if "sequence" not in record:
        earlier = [_sequence(read_record(other)) for other in runs(folder or run.parent)]
        record = {**record, "sequence": max(earlier, default=0) + 1}
    tmp = run / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, run / RECORD)


def read_record(run: Path) -> dict:
    return outputs.read_object(run / RECORD) or {}


def history_line(run: Path, current: Path | None) -> str:
    """run id, status, accuracy, wall time; `*` marks the run `latest` names."""
    record, summary = read_record(run), outputs.read_summary(run)
    status = str(record.get("status") or ("finished" if summary else "unknown"))[:20]
    if record.get("exit_code"):
        status += f" (exit {str(record['exit_code'])[:10]})"
    accuracy = outputs.shown(summary or {}, "test_accuracy", ".4f") or "-"
    wall = outputs.shown(record, "wall_seconds", ".1f") or outputs.shown(summary or {}, "wall_seconds", ".1f")
    wall = wall and f"{max(float(wall), 0.0):.1f}"  # a wall clock stepped back during the run: 0, never less
    mark = "*" if current is not None and run.name == current.name else " "
    return f"{mark} {run.name}  {status:<20} {accuracy:>8}  {f'{wall} s' if wall else '-':>9}"


def history(folder: Path) -> list[str]:
    current = latest(folder)
    header = f"  {'run':<{len(new_run_id())}}  {'status':<20} {'accuracy':>8}  {'wall':>9}"
    return [header] + [history_line(run, current) for run in runs(folder)]


def adopt_unversioned(folder: Path) -> None:
    """Results kept directly in the job folder (before runs had ids) become a run of their own."""
    if not (folder / outputs.RUN_FILE).exists() and not (folder / outputs.SUMMARY).exists():
        return
    loose = [p for p in folder.iterdir() if not (RUN_ID.fullmatch(p.name) or p.name in (LOCK, LATEST)
                                                 or p.name.startswith("."))]
    when = max(p.lstat().st_mtime for p in loose)
    run_id = new_run_id(when)
    staging = folder / f".{run_id}.adopting"
    staging.mkdir()
    for path in loose:
        os.rename(path, staging / path.name)
    os.rename(staging, folder / run_id)
    if outputs.read_summary(folder / run_id):
        write_record(folder / run_id, {"run_id": run_id, "status": "finished", "exit_code": 0, "sequence": 0})
        set_latest(folder, run_id)


def live_logs(folder: Path, run_id: str) -> Path:
    """The folder a running run of `jaxgen run` writes its processes' logs in (rank-<i>.log), a hidden
    name in the job folder; at the run's end it is the run folder's LOGS."""
    return folder / f".{run_id}.{LOGS}"


def log_name(rank: int) -> str:
    return f"rank-{rank}.log"


def remove_stale_staging(folder: Path) -> None:
    """What a run stopped mid-collection left (only ever hidden names): its staging, its live logs."""
    for path in [*folder.glob(".*.collecting"), *folder.glob(f".*.{LOGS}")]:
        shutil.rmtree(path, ignore_errors=True)


def keep(source: Path, folder: Path, status: str, exit_code: int) -> Path:
    """Move a run's collected results (a directory beside `folder`) in as a new run of the job;
    `latest` names it when it finished with a summary. Used for a cluster run's fetched results."""
    run_id = new_run_id()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_record(source, {"run_id": run_id, "name": folder.name, "status": status, "exit_code": exit_code}, folder)
        os.rename(source, folder / run_id)
    except OSError as error:
        raise UserError(f"{folder}: cannot keep the run's results there: {error.strerror or error}") from None
    if status == "finished" and outputs.read_summary(folder / run_id):
        set_latest(folder, run_id)
    return folder / run_id
