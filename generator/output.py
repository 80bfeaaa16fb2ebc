"""Write a render: to stdout, or atomically into a directory (all files or none)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from . import yaml_text
from .errors import UserError
from .targets import target as target_of

MARKER = ".jaxgen-output"  # marks a directory as ours, so replacing it can never delete user files


def dump_yaml(docs: list[dict]) -> str:
    return yaml_text.dump_all(docs)


def dump_json(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def dump_json_list(docs: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2, ensure_ascii=False) + "\n"


# kubectl apply -f DIR applies the files in name order: what a job needs when it is created (the
# outputs claim its pods mount, the TrainingRuntime a TrainJob names) sorts before every other file.
NEEDED_FIRST = ("PersistentVolumeClaim", "TrainingRuntime")


def file_name(doc: dict, fmt: str) -> str:
    first = "0-" if doc["kind"] in NEEDED_FIRST else ""
    return f"{first}{doc['kind'].lower()}-{doc['metadata']['name']}.{fmt}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_directory(target: Path, files: dict[str, str]) -> None:
    """Make `target` hold exactly `files`: staged beside it, then swapped in with renames."""
    target = target.resolve() if target.exists() else Path(os.path.abspath(target))
    if target.exists():
        if not target.is_dir():
            raise UserError(f"{target}: exists and is not a directory")
        if any(target.iterdir()) and not (target / MARKER).exists():
            raise UserError(f"{target}: refusing to replace a non-empty directory that jaxgen did not write")
    parent = target.parent
    if not parent.is_dir():  # name the file that stands where a directory of the path should be
        blocker = next((a for a in (*reversed(parent.parents), parent) if a.exists() and not a.is_dir()), None)
        if blocker is not None:
            raise UserError(f"{target}: cannot write: {blocker} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
        staging.chmod(0o777 & ~_umask())
    except OSError as exc:
        if target.is_dir() and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            # nothing can be staged beside it (a container's volume under a read-only or foreign
            # parent): the directory itself can still be made to hold the render
            _write_inside(target, files)
            return
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None
    old = None
    try:
        for name, text in files.items():
            (staging / name).parent.mkdir(exist_ok=True)
            (staging / name).write_text(text, encoding="utf-8")
        (staging / MARKER).write_text("written by jaxgen render; replaced as a whole on the next render\n")
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent)) / "previous"
            try:
                os.rename(target, old)
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                _write_inside(target, files)  # a mount point cannot be renamed: its contents can
                return
        os.rename(staging, target)
    except OSError as exc:
        if old is not None and old.exists() and not target.exists():
            os.rename(old, target)  # put the previous render back: all files or none
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None
    finally:
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)  # left only when the files went inside a mount point


def _write_inside(target: Path, files: dict[str, str]) -> None:
    """Make a directory that cannot be renamed (a mount point: a bind mount, a container's volume) hold
    exactly `files`: staged inside it, then the previous render's entries (it is empty or jaxgen's)
    removed and each new one renamed into place. A crash in between leaves a mix that the next
    render replaces, never a user's file touched."""
    staging = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=".jaxgen-staging.", dir=target))
        staging.chmod(0o777 & ~_umask())
        for name, text in files.items():
            (staging / name).parent.mkdir(exist_ok=True)
            (staging / name).write_text(text, encoding="utf-8")
        (staging / MARKER).write_text("written by jaxgen render; replaced as a whole on the next render\n")
        for entry in target.iterdir():
            if entry != staging:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in staging.iterdir():
            os.rename(entry, target / entry.name)
        staging.rmdir()
    except OSError as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None


def outputs_uri(values: dict) -> str:
    """Where the trainer keeps the job's outputs in its bucket, s3://BUCKET/PREFIX/NAME, or ""."""
    uri = values["outputs"]["uri"].rstrip("/")
    return f"{uri}/{values['name']}" if uri else ""


def release_record(values: dict) -> dict[str, str]:
    """What scripts/prepare.sh keeps in BUILD/release/ for every target: the merged variables, and the
    release's identity that run.sh and clean.sh read."""
    release = {"NAME": values["name"], "NAMESPACE": values["namespace"], "TARGET": values["target"],
               "HOSTS_COUNT": values["hosts_count"], **target_of(values).facts(values["name"]),
               # the job's outputs in its bucket, where run.sh fetches the results from ("" = none)
               "OUTPUTS_URI": outputs_uri(values), "OUTPUTS_ENDPOINT": values["outputs"]["endpoint"]}
    return {"release/values.json": json.dumps(values, indent=2) + "\n",
            "release/release.env": "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in release.items())}
