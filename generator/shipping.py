"""What travels with a Kubernetes job in its ConfigMap, `<name>-shipped-<digest of its contents>`: on a stock image
(image.source stock) the trainer package of this checkout and the pinned packages to install where the
image lacks them; a program folder (program.dir). A first container (pod-start.py) unpacks them
into the pod's run folder. The archives are byte-for-byte reproducible (sorted entries, no times, no
owners), so a render and `helm --set-file` of the same checkout and folder agree.

`python -m generator.shipping trainer|program DIR` prints an archive as base64, for
`helm --set-file image.trainer_archive=FILE` and `--set-file program.archive=FILE`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import stat
import sys
import tarfile
from pathlib import Path

from .errors import UserError, excerpt, printable

# The files the ConfigMap carries as they are (pod-start.py, sitecustomize.py, stock-requirements.txt):
# links to the chart's shipped/, which the chart's templates read.
POD_FILES = Path(__file__).resolve().parent / "data"
TRAINER_DIR = Path(__file__).resolve().parents[1] / "trainer"
SHIPPED_DIR = "/jax-training/shipped"  # the ConfigMap, read-only
RUN_DIR = "/jax-training/run"  # the pod's emptyDir: trainer/, packages/, program/
BUILT_PYTHONPATH = "/opt/jax-training"  # where the built image keeps the trainer (trainer/Dockerfile)
VOLUME, RUN_VOLUME = "shipped", "run"
# A ConfigMap holds at most 1 MiB; the trainer's archive takes about 100 KiB of it.
PROGRAM_ARCHIVE_LIMIT = 768 * 1024
# What a Helm release holds of the archives, in base64 characters, the trainer's and the program's
# together. Helm keeps each release in a Secret whose data, base64 of the gzip of the release's JSON, the
# API server holds to 1 MiB (MaxSecretSize); the release carries each archive twice (in its values and in
# the rendered ConfigMap), gzip leaves base64 of compressed bytes at 3/4, so each character of archive
# costs about 2 bytes of the Secret, and the chart with the rest of the release about 120 KiB
# (tests/chart/test_helm_release_size.py measures both with Helm). 384 KiB: the trainer's ~134 KiB and
# a program of about 190 KiB packed; jaxgen render and prepare.sh, which keep no release, allow 768 KiB.
HELM_ARCHIVES_LIMIT = 384 * 1024
PROGRAM_FILES_LIMIT = 4 * 1024 * 1024


class ShippingError(UserError):
    """A program folder that cannot travel (exit 2)."""


def stock(values: dict) -> bool:
    return values["image"].get("source", "built") == "stock"


def shipped(values: dict) -> bool:
    """Whether the job has a ConfigMap of code and a first container that unpacks it."""
    return stock(values) or bool(values["program"].get("dir"))


def _entries(folder: Path) -> list[tuple[Path, str]]:
    """(path, name in the archive) of every directory and file under folder, sorted; what leaves the
    folder or is no file is refused in one line naming program.dir."""
    entries = []
    for root, dirs, files in os.walk(folder):
        # hidden entries (.git, .env, .venv, …) stay behind: credentials must not travel in a ConfigMap
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in dirs + sorted(f for f in files if not f.startswith(".")):
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                target = path.resolve()
                if folder.resolve() not in target.parents:
                    raise ShippingError(f"$.program.dir: {excerpt(printable(relative))} is a link leaving the folder "
                                        f"(to {excerpt(printable(str(target)))})")
                mode = path.stat().st_mode
                if stat.S_ISDIR(mode):
                    raise ShippingError(f"$.program.dir: {excerpt(printable(relative))} is a link to a folder; "
                                        "give the folder itself")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ShippingError(f"$.program.dir: {excerpt(printable(relative))} is a device, socket or pipe, "
                                    "not a file")
            if not name.endswith(".pyc"):
                entries.append((path, relative))
    return sorted(entries, key=lambda entry: entry[1])


def _archive(entries: list[tuple[Path, str]], prefix: str = "") -> bytes:
    """A tar.gz of the entries with no times, owners or modes but readable, and executable where the
    file was: the same bytes for the same files."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, name in entries:
            info = tarfile.TarInfo(prefix + name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            data = path.read_bytes()
            info.size, info.mode = len(data), 0o755 if path.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def trainer_archive() -> bytes:
    """The trainer package of this checkout, as trainer/Dockerfile copies it into the built image."""
    return _archive([(path, name) for path, name in _entries(TRAINER_DIR) if name != "Dockerfile"], "trainer/")


def program_archive(folder: str) -> bytes:
    """program.dir's files, refused in one line when the folder is missing, too big, or holds a link
    leaving it or a device."""
    path = Path(folder)
    if not path.is_dir():
        raise ShippingError(f"$.program.dir: {excerpt(printable(folder))} is not a folder")
    try:
        return _packed_program(path, folder)
    except (OSError, RuntimeError) as error:  # a dangling link, a link loop, an unreadable file
        where = Path(getattr(error, "filename", None) or path)
        where = where.relative_to(path) if path in where.parents else where  # the entry, within the folder
        reason = getattr(error, "strerror", None) or str(error)
        raise ShippingError(f"$.program.dir: {excerpt(printable(str(where)))} cannot be read: {printable(reason)}") \
            from None


def _packed_program(path: Path, folder: str) -> bytes:
    entries = _entries(path)
    size = sum(p.stat().st_size for p, _ in entries if not p.is_dir())
    if size > PROGRAM_FILES_LIMIT:
        raise ShippingError(f"$.program.dir: {excerpt(printable(folder))} holds {size} bytes of files, more than "
                            f"{PROGRAM_FILES_LIMIT} (4 MiB); leave data out of it (data.volume) or build an image")
    data = _archive(entries)
    if len(data) > PROGRAM_ARCHIVE_LIMIT:
        raise ShippingError(f"$.program.dir: {excerpt(printable(folder))} packs into {len(data)} bytes, more than "
                            f"{PROGRAM_ARCHIVE_LIMIT} (768 KiB, what a ConfigMap leaves it); build an image")
    return data


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def config_map(values: dict) -> tuple[dict, dict]:
    """The ConfigMap's data and binaryData (base64)."""
    data = {"pod-start.py": (POD_FILES / "pod-start.py").read_text()}
    binary = {}
    if stock(values):
        data["stock-requirements.txt"] = (POD_FILES / "stock-requirements.txt").read_text()
        binary["trainer.tar.gz"] = encoded(trainer_archive())
    if values["program"].get("dir"):
        data["sitecustomize.py"] = (POD_FILES / "sitecustomize.py").read_text()
        binary["program.tar.gz"] = encoded(program_archive(values["program"]["dir"]))
    return data, binary


def content_digest(data: dict, binary: dict) -> str:
    """What names the ConfigMap after its contents (the chart's jax-training.shippedName computes the same):
    the sha256 of one `key=sha256(value)` line per entry, keys sorted, first 10 hex digits. A render of other
    code is another ConfigMap, so pods restarted under a running job never unpack code their peers lack."""
    entries = {**data, **binary}
    lines = [f"{key}={hashlib.sha256(entries[key].encode()).hexdigest()}" for key in sorted(entries)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:10]


def helm_sized(archive: str, folder: str) -> str:
    """The program's archive for `helm --set-file`, refused in one line when a Helm release cannot hold it
    (the chart refuses the trainer's and the program's together over HELM_ARCHIVES_LIMIT)."""
    if len(archive) > HELM_ARCHIVES_LIMIT:
        raise ShippingError(f"$.program.dir: {excerpt(printable(folder))} packs into {len(archive)} base64 "
                            f"characters, over the {HELM_ARCHIVES_LIMIT} that fit a Helm release (its Secret is at "
                            "most 1 MiB); render with jaxgen or scripts/prepare.sh (768 KiB packed) or build an image")
    return archive


def main(argv: list[str]) -> None:
    try:
        if argv[:1] == ["trainer"] and len(argv) == 1:
            print(encoded(trainer_archive()), end="")
        elif argv[:1] == ["program"] and len(argv) == 2:
            print(helm_sized(encoded(program_archive(argv[1])), argv[1]), end="")
        else:
            print("usage: python -m generator.shipping trainer | program DIR  (prints the archive, base64)",
                  file=sys.stderr)
            sys.exit(2)
    except ShippingError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
