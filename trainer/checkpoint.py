"""Atomic, resumable checkpoints: one .npz per saved step in the job's `checkpoints/` directory
(trainer/outputs.py), written to a temporary file, fsynced and renamed into place, so a crash
mid-write leaves the previous checkpoint intact and never a partial one.

A checkpoint holds the flattened (params, opt_state) leaves, the global step and a fingerprint of
the configuration that determines the state's meaning (model, optimizer, batch, seed, data).
Every failure to write or read one is a CheckpointError: one line and the checkpoint exit code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from trainer import outputs
from trainer.config import named
from trainer.errors import CheckpointError, first_line

PATTERN = outputs.CHECKPOINT_FILE
KEEP = 2
# Temporary files, renamed into place once complete; one a killed process left is removed at the next save.
TEMP_PREFIX, TEMP_SUFFIX = ".ckpt-", ".tmp"


def path_of(directory: Path, step: int) -> Path:
    """The file of the checkpoint of `step` in `directory`."""
    return directory / f"ckpt-{step:010d}.npz"


def check_writable(directory: str | os.PathLike) -> None:
    """Fail at start, naming the flag, when checkpoints could never be saved (not at the first save,
    after the data load, the compile and an epoch of work)."""
    if Path(directory).exists() and not Path(directory).is_dir():
        raise CheckpointError(f"{named('checkpoint_dir')} {directory}: not a directory")
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as e:
        raise CheckpointError(f"{named('checkpoint_dir')} {directory}: cannot write checkpoints there: "
                              f"{e.strerror or e}") from None


def list_steps(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for name in os.listdir(directory) if (m := PATTERN.match(name)))


def save(directory: str | os.PathLike, step: int, leaves: list[np.ndarray], fingerprint: dict,
         names: list[str] | None = None, before_rename=None) -> Path:
    """Write one checkpoint atomically and keep the newest KEEP. `before_rename(step)`: a test hook,
    run once the temporary file is written."""
    try:
        return _save(Path(directory), step, leaves, fingerprint, names, before_rename)
    except OSError as e:  # ENOSPC, EROFS, EACCES…: retrying the job cannot help
        raise CheckpointError(f"cannot write the checkpoint of step {step} to {directory}: "
                              f"{e.strerror or e}") from None


def _save(directory: Path, step: int, leaves: list[np.ndarray], fingerprint: dict, names: list[str] | None,
          before_rename) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"leaf_{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    meta = json.dumps({"step": step, "num_leaves": len(leaves), "names": names or [], "fingerprint": fingerprint},
                      sort_keys=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __meta__=np.frombuffer(meta.encode(), np.uint8), **arrays)
            f.flush()
            os.fsync(f.fileno())
        if before_rename:
            before_rename(step)
        final = path_of(directory, step)
        os.replace(tmp, final)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for old in list_steps(directory)[:-KEEP]:
        path_of(directory, old).unlink(missing_ok=True)
    for stale in directory.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):  # left by a process killed mid-write
        stale.unlink(missing_ok=True)
    return final


def load_latest(directory: str | os.PathLike, fingerprint: dict, template: list[tuple[str, np.ndarray]] | None = None,
                advice: str | None = None):
    """(step, leaves) of the newest checkpoint in `directory`, or None if there is none. `advice`: what a
    job of another configuration can do (default: an empty checkpoint directory, or the original settings).

    A checkpoint of another configuration is an error (resuming from it would silently train
    something else), and so is one that cannot be read: writes are atomic, so such a file is
    foreign or damaged, and starting over from an older one would hide that. `template`: the
    (name, array) leaves of the state to restore into; the checkpoint's must match them in number,
    names, sizes and kinds, and come back in their shapes and dtypes.
    """
    directory = Path(directory)
    for step in reversed(list_steps(directory)):
        path = path_of(directory, step)
        meta, leaves = _read_state(path, step)
        if meta["fingerprint"] != fingerprint:
            diffs = [
                f"{k}: {meta['fingerprint'].get(k)!r} != {fingerprint.get(k)!r}"
                for k in sorted(set(fingerprint) | set(meta["fingerprint"]))
                if meta["fingerprint"].get(k) != fingerprint.get(k)
            ]
            raise CheckpointError(
                f"{path} was written by another configuration ({'; '.join(diffs)}); "
                + (advice or f"use an empty {named('checkpoint_dir')} or the original settings")
            )
        return meta["step"], leaves if template is None else _fit(path, meta, leaves, template)
    return None


def _fit(path: Path, meta: dict, leaves: list[np.ndarray], template: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """The checkpoint's leaves in the template's shapes and dtypes, or a CheckpointError naming the
    first leaf that does not fit (a file of another trainer version or a damaged one)."""
    def refuse(reason: str):
        return CheckpointError(f"{path} does not fit this configuration's state ({reason}); move it away or use "
                               "another --checkpoint-dir")

    if len(leaves) != len(template):
        raise refuse(f"{len(leaves)} arrays, the state has {len(template)}")
    names = meta.get("names") or []
    fitted = []
    for i, (leaf, (name, want)) in enumerate(zip(leaves, template)):
        shown = name or f"leaf {i}"
        if names and (i >= len(names) or names[i] != name):
            raise refuse(f"array {i} is {str(names[i] if i < len(names) else None)[:100]!r}, the state's {shown!r}")
        if leaf.size != want.size:
            raise refuse(f"{shown}: shape {leaf.shape}, the state's {want.shape}")
        if not np.can_cast(leaf.dtype, want.dtype, casting="same_kind"):
            raise refuse(f"{shown}: dtype {leaf.dtype}, the state's {want.dtype}")
        fitted.append(np.asarray(leaf, dtype=want.dtype).reshape(want.shape))
    return fitted


def _check_meta(meta, step: int | None) -> None:
    """A ValueError unless `meta` is what _save writes (of `step`, when the file's name gives one)."""
    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not isinstance(meta, dict) or not isinstance(meta.get("fingerprint"), dict):
        raise ValueError("no configuration fingerprint: not a checkpoint of this trainer")
    if not whole(meta.get("step")):
        raise ValueError(f"its step {str(meta.get('step'))[:40]!r} is not a step number")
    if step is not None and meta["step"] != step:
        raise ValueError(f"it holds step {meta['step']}, its name says {step}")
    if not whole(meta.get("num_leaves")):
        raise ValueError(f"its array count {str(meta.get('num_leaves'))[:40]!r} is not a count")
    names = meta.setdefault("names", [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError("its array names are not a list of names")


def _read_state(path: Path, step: int | None = None) -> tuple[dict, list[np.ndarray]]:
    """(metadata, leaves) of one checkpoint file (of `step`); anything else is a CheckpointError naming it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            _check_meta(meta, step)
            return meta, [z[f"leaf_{i:04d}"] for i in range(meta["num_leaves"])]
    except Exception as e:  # noqa: BLE001  (zipfile, numpy, json and key errors alike)
        raise CheckpointError(f"{path}: unreadable checkpoint ({first_line(e, 200)}); move it away or use another "
                              f"{named('checkpoint_dir')}") from None


def read(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, {leaf name: array}) of one checkpoint file, for inspection and tests."""
    meta, leaves = _read_state(Path(path))
    names = meta["names"] or [f"leaf_{i:04d}" for i in range(meta["num_leaves"])]
    return meta, dict(zip(names, leaves))
