"""Copies out of a job's outputs, and writes beside them, that never follow a link.

A job decides what its outputs folder holds: a symlink `curves.png -> ~/.bashrc`, a hard link to
another job's file, a device file. Copying its results keeps regular files and folders only and
names what it dropped in one line; a write replaces whatever stands at its path (a symlink is
replaced, never written through). Both read and create every entry relative to an open folder
(dir_fd, O_NOFOLLOW), so nothing is resolved through a link on the way.

For a copy out of a claim, scripts/run.sh runs PACK (`python -m generator.runstore.confined pack-script`)
in a pod that mounts it: a tar stream of the regular files (not hard linked) and folders of the
job's outputs, naming the rest on stderr; `python -m generator.runstore.confined extract DEST --pod-log LOG`
unpacks it into the new folder DEST the same way and prints one line naming everything left out.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import sys
import tarfile
from pathlib import Path
from typing import BinaryIO, Collection

from trainer import outputs

from ..errors import printable

NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
FILE_MODE = 0o755  # permission bits kept from a copied file (no setuid, setgid or sticky bit)


DROPPED = "dropped: "  # how PACK names what it leaves out, one "<path> (<why>)" a line on stderr
# Runs in any image with python (the results pod's): argv = the outputs folder, then top-level names to skip.
PACK = f"""
import os, stat, sys, tarfile
root, skip = sys.argv[1], set(sys.argv[2:])
# a name as printable() shows it: one line, whatever the job named its file
shown = lambda name: "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)
if not stat.S_ISDIR(os.lstat(root).st_mode):  # the outputs folder itself may be a link the job left
    sys.exit(root + ": not a folder")
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        for name in sorted(dirs + files):
            path, member = os.path.join(folder, name), os.path.normpath(os.path.join(rel, name))
            mode = os.lstat(path)
            if stat.S_ISDIR(mode.st_mode):
                tar.add(path, member, recursive=False)
            elif stat.S_ISREG(mode.st_mode) and mode.st_nlink == 1:
                tar.add(path, member)
            else:
                why = "hard link" if stat.S_ISREG(mode.st_mode) else "symlink" if stat.S_ISLNK(mode.st_mode) else "not a regular file"
                print({DROPPED!r} + shown(member) + " (" + why + ")", file=sys.stderr)
"""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "not a regular file"


SHOWN = 10  # names of what a copy left out that its line gives, before a count of the rest


def dropped_line(dropped: list[str], more: int = 0) -> str | None:
    """One line naming what a copy left out (`dropped`, and `more` not named), or None when it kept
    everything."""
    if not dropped and not more:
        return None
    rest = len(dropped) + more - SHOWN
    shown = ", ".join(dropped[:SHOWN]) + (f" and {rest} more" if rest > 0 else "")
    return f"not copied (only regular files and folders are): {printable(shown)}"  # the job chose the names


def _copy_file(source_fd: int, name: str, target_fd: int, mode: int) -> None:
    src = os.open(name, os.O_RDONLY | NOFOLLOW, dir_fd=source_fd)
    try:
        dst = os.open(name, NEW_FILE, mode & FILE_MODE, dir_fd=target_fd)
        with os.fdopen(src, "rb", closefd=False) as reader, os.fdopen(dst, "wb") as writer:
            shutil.copyfileobj(reader, writer)
    finally:
        os.close(src)


def _copy_folder(source_fd: int, target_fd: int, prefix: str, skip: Collection[str], dropped: list[str]) -> None:
    with os.scandir(source_fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        if not prefix and name in skip:
            continue
        where = prefix + name
        info = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(name, 0o755, dir_fd=target_fd)
            source, target = os.open(name, DIRECTORY, dir_fd=source_fd), os.open(name, DIRECTORY, dir_fd=target_fd)
            try:
                _copy_folder(source, target, where + "/", skip, dropped)
            finally:
                os.close(source)
                os.close(target)
        elif not stat.S_ISREG(info.st_mode):
            dropped.append(f"{where} ({_kind(info.st_mode)})")
        elif info.st_nlink > 1:  # its other name may be anywhere on the claim's filesystem
            dropped.append(f"{where} (hard link)")
        else:
            _copy_file(source_fd, name, target_fd, info.st_mode)


def copy_tree(source: Path, destination: Path, skip: Collection[str] = ()) -> list[str]:
    """Copy the regular files and folders of `source` into the new folder `destination`, leaving out
    the top-level names in `skip`; what else was left out (links, devices…), as relative paths."""
    dropped: list[str] = []
    destination.mkdir(parents=True)
    source_fd, target_fd = os.open(source, DIRECTORY), os.open(destination, DIRECTORY)
    try:
        _copy_folder(source_fd, target_fd, "", skip, dropped)
    finally:
        os.close(source_fd)
        os.close(target_fd)
    return dropped


def _member_parts(name: str) -> tuple[str, ...] | None:
    """A member's path as folder names below the destination, or None when it would leave it: a file
    name as outputs.file_parts takes it, after the `.` and empty names tar writes (`./a`, `a/`)."""
    if name.startswith("/"):
        return None
    kept = "/".join(part for part in name.split("/") if part not in ("", "."))
    return outputs.file_parts(kept) if kept else ()


def _open_folder(root_fd: int, parts: tuple[str, ...]) -> int:
    """The folder root/parts, made where missing, opened without following a link."""
    fd = os.dup(root_fd)
    for part in parts:
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            next_fd = os.open(part, DIRECTORY, dir_fd=fd)
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def extract_tar(stream: BinaryIO, destination: Path) -> list[str]:
    """Unpack a tar stream into the new folder `destination`: its regular files and folders only;
    what was left out (links, devices, names reaching outside), as member names."""
    dropped: list[str] = []
    destination.mkdir(parents=True)
    root = os.open(destination, DIRECTORY)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                parts = _member_parts(member.name)
                if parts is None:
                    dropped.append(f"{member.name} (outside the folder)")
                elif member.isdir():
                    os.close(_open_folder(root, parts))
                elif not member.isreg():
                    what = ("symlink" if member.issym() else "hard link" if member.islnk()
                            else "device" if member.ischr() or member.isblk() else "fifo" if member.isfifo()
                            else "not a regular file")
                    dropped.append(f"{member.name} ({what})")
                elif parts:
                    folder = _open_folder(root, parts[:-1])
                    try:
                        try:  # a name given twice: the later copy wins, as with tar
                            os.unlink(parts[-1], dir_fd=folder)
                        except FileNotFoundError:
                            pass
                        fd = os.open(parts[-1], NEW_FILE, member.mode & FILE_MODE, dir_fd=folder)
                        with os.fdopen(fd, "wb") as writer:
                            shutil.copyfileobj(archive.extractfile(member), writer)
                    finally:
                        os.close(folder)
    finally:
        os.close(root)
    return dropped


def write_file(path: Path, data: bytes) -> None:
    """Write `path` whole: a fresh file beside it (O_CREAT|O_EXCL|O_NOFOLLOW), renamed over a regular
    file or a symlink there, so a link is replaced, never written through. A device, FIFO or socket
    at `path` (/dev/null) is refused with an OSError, never replaced."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(f"not a regular file ({'folder' if stat.S_ISDIR(mode) else _kind(mode)}): left as it is")
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, NEW_FILE, 0o666)
    try:
        with os.fdopen(fd, "wb") as writer:
            writer.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


MAX_LOG_LINE = 1 << 16  # characters of a line of the pod's log read (a path is at most 4096 bytes)


def _pod_dropped(log: Path) -> tuple[list[str], int]:
    """What PACK named on the pod's stderr: the first SHOWN names and how many more. The log is the
    job's to fill: it is read a line at a time, each with a bound, and no more names are kept."""
    named, more = [], 0
    with open(log, encoding="utf-8", errors="replace") as f:
        while line := f.readline(MAX_LOG_LINE):
            whole = line.endswith("\n") or len(line) < MAX_LOG_LINE  # to its end, or the file's
            if whole and line.startswith(DROPPED):
                if len(named) < SHOWN:
                    named.append(line[len(DROPPED):].rstrip("\n"))
                else:
                    more += 1
            while not line.endswith("\n") and len(line) == MAX_LOG_LINE and (line := f.readline(MAX_LOG_LINE)):
                pass  # the rest of a longer line, left unread
    return named, more


def main(argv: list[str]) -> int:
    if argv == ["pack-script"]:
        print(PACK)
        return 0
    if argv == ["left-out"]:  # the top-level names PACK is given to skip
        print(" ".join(outputs.RESTART_STATE))
        return 0
    if len(argv) not in (2, 4) or argv[0] != "extract" or argv[2:3] not in ([], ["--pod-log"]):
        print("usage: python -m generator.runstore.confined pack-script | left-out | extract DEST [--pod-log LOG]  (a tar stream on stdin)",
              file=sys.stderr)
        return 2
    try:
        dropped, more = extract_tar(sys.stdin.buffer, Path(argv[1])), 0
        if len(argv) == 4:
            named, more = _pod_dropped(Path(argv[3]))
            dropped = named + dropped
    except (OSError, tarfile.TarError) as e:
        print(f"error: {printable(argv[1])}: cannot unpack the results: {e}", file=sys.stderr)
        return 1
    line = dropped_line(dropped, more)
    if line:
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
