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
from trainer.errors import CheckpointError, first_line
from trainer.outputs import RUN_FILE


MAX_RECORD_BYTES = 1 << 20  # the most of a run.json read: one is a few hundred bytes; /dev/zero has no end
SHOWN = 5  # differences named in the refusal
QUOTED = 100  # characters of a name, key or value quoted from another job's record


def _cut(text: str) -> str:
    return text if len(text) <= QUOTED else text[:QUOTED] + "…"


def _quoted(value) -> str:
    """repr(value) on one line of at most QUOTED characters."""
    return _cut(repr(value))


def _differences(theirs: dict, ours: dict) -> str:
    keys = sorted(set(theirs) | set(ours))
    differing = [f"{_cut(repr(k)[1:-1])} {_quoted(theirs.get(k))} there, {_quoted(ours.get(k))} now"
                 for k in keys if theirs.get(k) != ours.get(k)]
    more = f"; and {len(differing) - SHOWN} more" if len(differing) > SHOWN else ""
    return "; ".join(differing[:SHOWN]) + more


def _started(created) -> str:
    """When the owner started, from its run.json's `created` (seconds since the epoch), whatever it holds."""
    if isinstance(created, (int, float)) and not isinstance(created, bool):
        try:
            return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(created))
        except (ValueError, OverflowError, OSError):  # NaN, out of range
            pass
    return "at an unknown time"


def claim(directory: str | os.PathLike, name: str, fingerprint: dict, bucket_uri: str | None = None) -> None:
    """Take `directory` for the job `name`, or check that it is already this job's. `bucket_uri`: where
    the job keeps a copy of its outputs in a bucket (restored into the directory at start), if it does."""
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
        with open(path, "rb") as f:
            text = f.read(MAX_RECORD_BYTES + 1)
        if len(text) > MAX_RECORD_BYTES:
            raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes")
        owner = json.loads(text)
    except OSError as e:
        raise CheckpointError(f"{directory}: cannot use it for the job's outputs: {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: unreadable ({first_line(e, 200)}); move it away or use another "
                              f"{named('checkpoint_dir')}") from None
    theirs = owner.get("fingerprint") if isinstance(owner, dict) else None
    if not isinstance(theirs, dict):
        raise CheckpointError(f"{path}: not a jax-training run record; move it away or use another "
                              f"{named('checkpoint_dir')}")
    if owner.get("name") != name or theirs != fingerprint:
        what = _differences(theirs, fingerprint) or f"job {_quoted(str(owner.get('name')))} there, {name!r} now"
        raise CheckpointError(f"{directory} holds the outputs of job {_quoted(str(owner.get('name')))} "
                              f"(started {_started(owner.get('created'))}) with "
                              f"other settings ({what}), so job {name!r} of this configuration may not use it: "
                              + start_over(directory, bucket_uri))


def start_over(directory: Path, bucket_uri: str | None = None) -> str:
    """What a job of other settings than the outputs' owner can do. With a bucket, its copy there
    (`bucket_uri`) is restored into any empty directory of the job: it goes too, or the job takes
    another place in the bucket."""
    if from_variables():  # the job's folder in its claim, whatever checkpoint.dir the pods mount it at
        gone = f"{directory} and every object under {bucket_uri}/" if bucket_uri else str(directory)
        return f"run it under another name (--set name=...), or with the original settings, or delete {gone} " \
               "to start this job over"
    # A rendered job's pods take these flags from the variables: name both spellings
    fields = ("run_name", "outputs_uri") if bucket_uri else ("run_name", "checkpoint_dir")
    keys = ", ".join(fields_named(n)[0].metadata["variable"] for n in fields)
    advice = f"choose another {named(fields[0])} or {named(fields[1])} (variables: {keys}), or the original settings"
    return f"{advice}; the job's copy in {bucket_uri} is restored into any {named('checkpoint_dir')}" if bucket_uri \
        else advice
