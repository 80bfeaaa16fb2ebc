"""Atomic, resumable checkpoints: one .npz per saved step, written to a temporary file, fsynced and
renamed into place, so a crash mid-write leaves the previous checkpoint intact and never a partial one.

A checkpoint holds the flattened (params, opt_state) leaves, the global step and a fingerprint of
the configuration that determines the state's meaning (model, optimizer, batch, seed, data).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from trainer.errors import CheckpointError, ConfigError

PATTERN = re.compile(r"^ckpt-(\d{10})\.npz$")
KEEP = 2


def _path(directory: Path, step: int) -> Path:
    return directory / f"ckpt-{step:010d}.npz"


def check_writable(directory: str | os.PathLike) -> None:
    """Fail at start, naming the flag, when checkpoints could never be saved (not at the first save,
    after the data load, the compile and an epoch of work)."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as e:
        raise ConfigError(f"--checkpoint-dir {directory}: cannot write checkpoints there: "
                          f"{e.strerror or e}") from None


def list_steps(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for name in os.listdir(directory) if (m := PATTERN.match(name)))


def save(directory: str | os.PathLike, step: int, leaves: list[np.ndarray], fingerprint: dict,
         names: list[str] | None = None) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"leaf_{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    meta = json.dumps({"step": step, "num_leaves": len(leaves), "names": names or [], "fingerprint": fingerprint},
                      sort_keys=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __meta__=np.frombuffer(meta.encode(), np.uint8), **arrays)
            f.flush()
            os.fsync(f.fileno())
        final = _path(directory, step)
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
        _path(directory, old).unlink(missing_ok=True)
    return final


def load_latest(directory: str | os.PathLike, fingerprint: dict, log=print):
    """(step, leaves) of the newest readable checkpoint in `directory`, or None if there is none.

    A checkpoint of another configuration is an error (resuming from it would silently train
    something else); an unreadable file is skipped in favour of the previous one.
    """
    directory = Path(directory)
    for step in reversed(list_steps(directory)):
        path = _path(directory, step)
        try:
            with np.load(path) as z:
                meta = json.loads(bytes(z["__meta__"]).decode())
                leaves = [z[f"leaf_{i:04d}"] for i in range(meta["num_leaves"])]
        except Exception as e:  # noqa: BLE001 - any unreadable file means "try the previous one"
            log(f"skipping unreadable checkpoint {path}: {e}")
            continue
        if meta["fingerprint"] != fingerprint:
            diffs = [
                f"{k}: {meta['fingerprint'].get(k)!r} != {fingerprint.get(k)!r}"
                for k in sorted(set(fingerprint) | set(meta["fingerprint"]))
                if meta["fingerprint"].get(k) != fingerprint.get(k)
            ]
            raise CheckpointError(
                f"{path} was written by another configuration ({'; '.join(diffs)}); "
                "use an empty --checkpoint-dir or the original settings"
            )
        return meta["step"], leaves
    return None


def read(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, {leaf name: array}) of one checkpoint file, for inspection and tests."""
    with np.load(path) as z:
        meta = json.loads(bytes(z["__meta__"]).decode())
        names = meta["names"] or [f"leaf_{i:04d}" for i in range(meta["num_leaves"])]
        return meta, {name: z[f"leaf_{i:04d}"] for i, name in enumerate(names)}


def latest_path(directory: str | os.PathLike) -> Path | None:
    steps = list_steps(Path(directory))
    return _path(Path(directory), steps[-1]) if steps else None
