"""Which job owns an outputs directory: run.json, written by process 0 when a job first starts there.

A job of the same name and configuration resumes in the directory; any other is refused at start,
before it could prune the owner's checkpoints or mix its metrics into the owner's.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from trainer import __version__
from trainer.config import fields_named, from_variables, named
from trainer.errors import CheckpointError
from trainer.outputs import RUN_FILE


def _differences(theirs: dict, ours: dict) -> str:
    keys = sorted(set(theirs) | set(ours))
    return "; ".join(f"{k} {theirs.get(k)!r} there, {ours.get(k)!r} now" for k in keys if theirs.get(k) != ours.get(k))


def _started(created) -> str:
    """When the owner started, from its run.json's `created` (seconds since the epoch), whatever it holds."""
    if isinstance(created, (int, float)) and not isinstance(created, bool):
        try:
            return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(created))
        except (ValueError, OverflowError, OSError):  # NaN, out of range
            pass
    return "at an unknown time"


def claim(directory: str | os.PathLike, name: str, fingerprint: dict) -> None:
    """Take `directory` for the job `name`, or check that it is already this job's."""
    directory = Path(directory)
    path = directory / RUN_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            record = {"name": name, "fingerprint": fingerprint, "created": round(time.time(), 3),
                      "version": __version__}
            tmp = path.with_name(f".{RUN_FILE}.tmp")
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, path)
            return
        owner = json.loads(path.read_text())
    except OSError as e:
        raise CheckpointError(f"{directory}: cannot use it for the job's outputs: {e.strerror or e}") from None
    except ValueError as e:
        raise CheckpointError(f"{path}: unreadable ({e}); move it away or use another {named('checkpoint_dir')}") from None
    theirs = owner.get("fingerprint") if isinstance(owner, dict) else None
    if not isinstance(theirs, dict):
        raise CheckpointError(f"{path}: not a jax-training run record; move it away or use another "
                              f"{named('checkpoint_dir')}")
    if owner.get("name") != name or theirs != fingerprint:
        what = _differences(theirs, fingerprint) or f"job {owner.get('name')!r} there, {name!r} now"
        raise CheckpointError(f"{directory} holds the outputs of job {str(owner.get('name'))[:100]!r} "
                              f"(started {_started(owner.get('created'))}) with "
                              f"other settings ({what}), so job {name!r} of this configuration may not use it: "
                              + _advice(directory))


def _advice(directory: Path) -> str:
    if from_variables():  # the job's folder in its claim, whatever checkpoint.dir the pods mount it at
        return (f"run it under another name (--set name=...), or with the original settings, or delete {directory} "
                "to start this job over")
    # A rendered job's pods take these flags from the variables: name both spellings
    keys = ", ".join(fields_named(n)[0].metadata["variable"] for n in ("run_name", "checkpoint_dir"))
    return (f"choose another {named('run_name')} or {named('checkpoint_dir')} (variables: {keys}), "
            "or the original settings")
