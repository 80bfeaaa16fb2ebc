"""A job's outputs never make a copy or a write reach outside the results folder: links, devices and
hard links it plants are left out of every copy (local collection, run.sh's pod-side tar and its
unpacking) and replaced, never written through, by `jaxgen results` and `jaxgen plot`."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from generator.runstore import confined
from generator.runstore.intake import collect
from tests.support.jaxgen import jaxgen
from tests.support.paths import REPO_ROOT
from trainer import outputs

SECRET = b"the operator's file\n"
METRICS = "".join(json.dumps(r) + "\n" for r in (
    {"event": "start", "step": 0, "time": 1},
    {"event": "step", "epoch": 1, "step": 10, "loss": 0.9, "time": 2},
    {"event": "epoch", "epoch": 1, "step": 20, "loss": 0.5, "train_accuracy": 0.8, "test_accuracy": 0.8, "time": 3}))


@pytest.fixture
def outside(tmp_path):
    """A file and a folder outside the results, as the operator's own."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_bytes(SECRET)
    return home


def snapshot(folder):
    return {p.relative_to(folder): (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(folder.rglob("*"))}


def plant(job, outside):
    """A job's outputs with every kind of link in them, beside its real results."""
    (job / "checkpoints").mkdir(parents=True)
    (job / "checkpoints" / "step-1").write_text("weights")
    for cache in ("xla-cache", "decoded-data"):  # what only a restart reads
        (job / cache).mkdir()
        (job / cache / "entry").write_text("cached")
    (job / "metrics.jsonl").write_text(METRICS)
    (job / "model").mkdir()
    (job / "model" / "card.md").write_text("card")
    (job / "curves.png").symlink_to(outside / ".bashrc")
    (job / "escape").symlink_to(outside)
    (job / "model" / "weights").symlink_to("../../home/.bashrc")
    os.link(outside / ".bashrc", job / "hard")
    os.mkfifo(job / "pipe")


def test_copy_tree_keeps_regular_files_only(tmp_path, outside):
    job, copy = tmp_path / "job", tmp_path / "copy"
    plant(job, outside)
    before = snapshot(outside)
    dropped = confined.copy_tree(job, copy, skip=outputs.RESTART_STATE)
    assert sorted(dropped) == ["curves.png (symlink)", "escape (symlink)", "hard (hard link)",
                               "model/weights (symlink)", "pipe (fifo)"]
    assert {str(p.relative_to(copy)) for p in copy.rglob("*")} == {"metrics.jsonl", "model", "model/card.md"}
    assert not any(p.is_symlink() for p in copy.rglob("*"))
    assert snapshot(outside) == before
    assert confined.dropped_line(dropped).startswith("not copied (only regular files and folders are): curves.png")


def test_local_collection_drops_links(tmp_path, outside):
    job, results = tmp_path / "claims" / "job", tmp_path / "results" / "job"
    plant(job, outside)
    _, dropped = collect(job, results, since=0.0)  # its folder made as needed
    assert len(dropped) == 5 and not any(p.is_symlink() for p in results.rglob("*"))
    assert (results / "metrics.jsonl").read_text() == METRICS and not (results / "checkpoints").exists()
    assert (outside / ".bashrc").read_bytes() == SECRET


def hostile_tar() -> bytes:
    """What a hostile tar stream can carry: links out, a member under a link, names that climb out, a device."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name, kind=tarfile.REGTYPE, data=b"", link=""):
            member = tarfile.TarInfo(name)
            member.type, member.linkname, member.size, member.mode = kind, link, len(data), 0o6755
            tar.addfile(member, io.BytesIO(data) if data else None)
        add("metrics.jsonl", data=METRICS.encode())
        add("link", tarfile.SYMTYPE, link="../home")
        add("link/.bashrc", data=b"overwritten")
        add("curves.png", tarfile.SYMTYPE, link="/etc/passwd")
        add("hard", tarfile.LNKTYPE, link="../home/.bashrc")
        add("../home/.bashrc", data=b"overwritten")
        add("/tmp/absolute", data=b"x")
        add("null", tarfile.CHRTYPE)
        add("sub/./data.txt", data=b"ok")
    return buffer.getvalue()


def test_extract_refuses_links_and_names_outside(tmp_path, outside):
    before = snapshot(outside)
    dest = tmp_path / "dest"
    dropped = confined.extract_tar(io.BytesIO(hostile_tar()), dest)
    assert dropped == ["link (symlink)", "curves.png (symlink)", "hard (hard link)",
                       "../home/.bashrc (outside the folder)", "/tmp/absolute (outside the folder)", "null (device)"]
    files = {str(p.relative_to(dest)): p for p in dest.rglob("*")}
    assert sorted(files) == ["link", "link/.bashrc", "metrics.jsonl", "sub", "sub/data.txt"]
    assert not any(p.is_symlink() for p in files.values()) and files["link"].is_dir()  # a folder of its own
    assert files["metrics.jsonl"].stat().st_mode & 0o7777 == 0o755  # no setuid or setgid bits
    assert snapshot(outside) == before and not (tmp_path / "tmp").exists()


def test_pack_script_and_extract_command(tmp_path, outside):
    """run.sh's pipeline, run here: the pod-side script over planted outputs into `extract`."""
    job, dest = tmp_path / "outputs" / "job", tmp_path / "results" / "job.part"
    plant(job, outside)
    dest.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    script = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "pack-script"], env=env,
                            capture_output=True, text=True, check=True).stdout
    pod_log = tmp_path / "pod.err"
    left_out = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "left-out"], env=env,
                              capture_output=True, text=True, check=True).stdout.split()
    assert left_out == ["checkpoints", "xla-cache", "decoded-data"]
    with open(pod_log, "w") as log:
        archive = subprocess.run([sys.executable, "-c", script, str(job), *left_out],
                                 stdout=subprocess.PIPE, stderr=log, check=True).stdout
    extract = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "extract", str(dest), "--pod-log", str(pod_log)],
                             input=archive, env=env, capture_output=True, check=True)
    assert extract.stderr.decode() == ("not copied (only regular files and folders are): curves.png (symlink), "
                                       "escape (symlink), hard (hard link), pipe (not a regular file), "
                                       "model/weights (symlink)\n")
    assert {str(p.relative_to(dest)) for p in dest.rglob("*")} == {"metrics.jsonl", "model", "model/card.md"}
    assert (outside / ".bashrc").read_bytes() == SECRET
    (tmp_path / "outputs" / "linked").symlink_to(outside)  # an outputs folder that is itself a link
    packed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "outputs" / "linked")], capture_output=True)
    assert packed.returncode == 1 and packed.stdout == b"" and b"linked: not a folder" in packed.stderr
    fresh = dest.with_name("fresh")
    bad = subprocess.run([sys.executable, "-m", "generator.runstore.confined", "extract", str(fresh)], input=b"not a tar",
                         env=env, capture_output=True)
    assert bad.returncode == 1 and bad.stderr.decode().startswith(f"error: {fresh}: cannot unpack the results:")


def test_results_and_plot_replace_a_link_instead_of_writing_through_it(tmp_path, outside):
    pytest.importorskip("matplotlib")
    run = tmp_path / "job"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "metrics.jsonl").write_text(METRICS)
    (run / "curves.png").symlink_to(outside / ".bashrc")
    result = jaxgen("results", str(run))
    assert result.exit_code == 1, result.stderr  # not finished (no summary), but the curves are drawn
    assert (outside / ".bashrc").read_bytes() == SECRET
    curves = run / "curves.png"
    assert not curves.is_symlink() and curves.read_bytes().startswith(b"\x89PNG")
    plot = tmp_path / "plot.svg"
    plot.symlink_to(outside / ".bashrc")
    result = jaxgen("plot", str(run / "metrics.jsonl"), "-o", str(plot))
    assert result.exit_code == 0, result.stderr
    assert (outside / ".bashrc").read_bytes() == SECRET
    assert not plot.is_symlink() and b"<svg" in plot.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
