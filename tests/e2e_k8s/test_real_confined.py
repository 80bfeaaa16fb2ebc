"""A job cannot reach outside its results folder through the links it leaves in its outputs: a real
job on the real node plants a symlink to an operator's file, one to an operator's folder and a hard
link to another file on its claim; run.sh copies the results out of the claim, `jaxgen results`
draws curves.png over the planted link, and nothing outside the results folder changes."""

from __future__ import annotations

import json

import pytest

from tests.e2e_k8s.kube import finish, prepare, start_run
from tests.e2e_k8s.real import PERSISTENCE, outputs_volume

# Rank 0 writes a small run into its outputs (checkpoint.dir/<name>, the claim) and plants links.
PROGRAM = """
import json, os, pathlib, sys
outside_file, outside_dir, name = sys.argv[1:4]
if os.environ["JAX_PROCESS_ID"] == "0":
    claim = pathlib.Path("/checkpoints")  # checkpoint.dir, where the outputs claim is mounted
    run = claim / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text("{}")
    records = [{"event": "step", "epoch": 1, "step": s, "loss": 1.0 / s, "time": s} for s in (1, 2, 3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in records))
    os.symlink(outside_file, run / "curves.png")
    os.symlink(outside_dir, run / "escape")
    other = claim / "another-jobs-file"
    other.write_text("not this job's")
    os.link(other, run / "hard")
    print("planted", sorted(os.listdir(run)), flush=True)
"""


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.timeout(600)
def test_links_planted_by_a_job_change_nothing_outside_its_results(real, tmp_path):
    cluster, sets = real
    name = "real-links"
    operator = tmp_path / "operator"
    (operator / "folder").mkdir(parents=True)
    (operator / ".bashrc").write_text("export PS1='$ '\n")
    (operator / "folder" / "notes.txt").write_text("mine\n")
    before = snapshot(operator)
    outputs_volume(cluster, name)
    build = tmp_path / "build"
    command = ["python", "-c", PROGRAM, str(operator / ".bashrc"), str(operator / "folder"), name]
    prepare(cluster, build, name, *sets, *PERSISTENCE, f"program.command={json.dumps(command)}",
            base="cpu-local.json")
    code, output = finish(start_run(cluster, build, timeout=300), timeout=400)
    assert code == 0, output[-6000:]
    assert "planted ['curves.png', 'escape', 'hard', 'metrics.jsonl', 'run.json']" in output, output[-3000:]
    assert ("not copied (only regular files and folders are): curves.png (symlink), escape (symlink), "
            "hard (hard link)") in output, output[-3000:]

    assert snapshot(operator) == before  # the operator's file and folder are untouched
    job = build / "results" / name  # a run folder of its own (generator/runstore/runs.py); `latest` is ours
    [results] = [p for p in job.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    kept = sorted(str(p.relative_to(results)) for p in results.rglob("*"))
    assert [p.name for p in job.rglob("*") if p.is_symlink()] in ([], ["latest"]), kept
    assert {"metrics.jsonl", "run.json"} <= set(kept) and not {"escape", "hard"} & set(kept), kept
    curves = results / "curves.png"  # drawn by jaxgen results, a file of its own
    assert not curves.is_symlink() and (not curves.exists() or curves.read_bytes().startswith(b"\x89PNG"))
    assert [p.name for p in build.rglob("*.tmp")] == []
