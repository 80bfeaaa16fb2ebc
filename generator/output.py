"""Write a render: to stdout, or atomically into a directory (all files or none)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from trainer.outputs import umask

from . import yaml_text
from .errors import UserError
from .runstore import location
from .targets import target as target_of

MARKER = ".jaxgen-output"  # marks a directory as ours, so replacing it can never delete user files
# The marker's first line; the lines after it name the entries the render wrote. Only those are replaced
# by the next render: what else the directory holds (a build folder's results/, the user's notes) is kept.
MARKER_HEAD = "written by jaxgen render; the entries below are replaced by the next render, anything else is kept"


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


def _top_names(files: dict[str, str]) -> list[str]:
    return sorted({name.split("/")[0] for name in files})


def _write_render(into: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (into / name).parent.mkdir(exist_ok=True)
        (into / name).write_text(text, encoding="utf-8")
    (into / MARKER).write_text("".join(f"{line}\n" for line in (MARKER_HEAD, *_top_names(files))), encoding="utf-8")


def _rendered(directory: Path) -> set[str]:
    """The entries of `directory` that its previous render wrote, its marker included: those its marker
    lists; a marker of an older jaxgen lists none, and its render was its YAML and JSON files and release/."""
    try:
        lines = (directory / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return set()
    if lines[:1] == [MARKER_HEAD]:
        listed = {name for name in lines[1:] if name not in ("", ".", "..") and "/" not in name}
    else:
        listed = {entry.name for entry in directory.iterdir()
                  if entry.name == "release" or (entry.suffix in (".yaml", ".json") and entry.is_file()
                                                 and not entry.is_symlink())}
    return listed | {MARKER}


def _kept(target: Path, files: dict[str, str]) -> list[str]:
    """What a render into `target` keeps there: every entry its previous render did not write. One that
    the new render would write is refused in one line, and nothing is written."""
    if not target.is_dir():
        return []
    rendered = _rendered(target)
    kept = sorted(entry.name for entry in target.iterdir()
                  if entry.name not in rendered and not entry.name.startswith(".jaxgen-staging."))
    clash = sorted(set(kept) & set(_top_names(files)))
    if clash:
        raise UserError(f"{target / clash[0]}: jaxgen did not write it and the render would replace it; "
                        "move it away first")
    return kept


def _carry(names: list[str], source: Path, into: Path, carried: list[str]) -> None:
    """Rename each of `names` from `source` into `into`, each added to `carried` once it is there (a
    rename that fails midway leaves the list naming those already carried)."""
    for name in names:
        if (source / name).exists() or (source / name).is_symlink():
            os.rename(source / name, into / name)
            carried.append(name)


def write_directory(target: Path, files: dict[str, str]) -> None:
    """Make `target` hold `files`, and keep there what the previous render did not write (a build
    folder's results/): staged beside it, the kept entries carried over, then swapped in with renames."""
    target = target.resolve() if target.exists() else Path(os.path.abspath(target))
    if target.exists():
        if not target.is_dir():
            raise UserError(f"{target}: exists and is not a directory")
        if any(target.iterdir()) and not (target / MARKER).exists():
            raise UserError(f"{target}: refusing to replace a non-empty directory that jaxgen did not write")
    kept = _kept(target, files)
    parent = target.parent
    if not parent.is_dir():  # name the file that stands where a directory of the path should be
        blocker = next((a for a in (*reversed(parent.parents), parent) if a.exists() and not a.is_dir()), None)
        if blocker is not None:
            raise UserError(f"{target}: cannot write: {blocker} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
        staging.chmod(0o777 & ~umask())
    except OSError as exc:
        if target.is_dir() and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            # nothing can be staged beside it (a container's volume under a read-only or foreign
            # parent): the directory itself can still be made to hold the render
            _write_inside(target, files)
            return
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None
    old, carried = None, []
    try:
        _write_render(staging, files)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent)) / "previous"
            try:
                os.rename(target, old)
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                _write_inside(target, files)  # a mount point cannot be renamed: its contents can
                return
            _carry(kept, old, staging, carried)
        os.rename(staging, target)
        carried = []
    except OSError as exc:
        if old is not None and old.exists() and not target.exists():
            back: list[str] = []
            try:
                _carry(carried, staging, old, back)
            finally:
                carried = [n for n in carried if n not in back]
            os.rename(old, target)  # put the previous render back: all files or none
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None
    finally:
        if carried:  # kept entries that could not be put back are never deleted: say where they are
            raise UserError(f"{target}: cannot write; {', '.join(carried)} left in {staging}")
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)  # left only when the files went inside a mount point


def _write_inside(target: Path, files: dict[str, str]) -> None:
    """Make a directory that cannot be renamed (a mount point: a bind mount, a container's volume) hold
    `files`: staged inside it, then the previous render's entries (what its marker lists) removed and
    each new one renamed into place; what else it holds is kept. A crash in between leaves a mix that
    the next render replaces, never a user's file touched."""
    staging = None
    try:
        rendered = _rendered(target)
        staging = Path(tempfile.mkdtemp(prefix=".jaxgen-staging.", dir=target))
        staging.chmod(0o777 & ~umask())
        _write_render(staging, files)
        for entry in target.iterdir():
            if entry != staging and (entry.name in rendered or entry.name.startswith(".jaxgen-staging.")):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in staging.iterdir():
            os.rename(entry, target / entry.name)
        staging.rmdir()
    except OSError as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"{target}: cannot write: {exc.strerror}") from None


def release_record(values: dict) -> dict[str, str]:
    """What scripts/prepare.sh keeps in BUILD/release/ for every target: the merged variables, and the
    release's identity that run.sh and clean.sh read."""
    release = {"NAME": values["name"], "NAMESPACE": values["namespace"], "TARGET": values["target"],
               "HOSTS_COUNT": values["hosts_count"], **target_of(values).facts(values["name"]),
               # where the job's outputs are (OUTPUTS_URI: its bucket's copy, where run.sh fetches the results
               # from; "" = none)
               **location.of_values(values).release_env(), "OUTPUTS_ENDPOINT": values["outputs"]["endpoint"]}
    return {"release/values.json": json.dumps(values, indent=2) + "\n",
            "release/release.env": "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in release.items())}
