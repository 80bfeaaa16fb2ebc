"""`jaxgen status --slurm` read from squeue and sacct: fakes of both on PATH print what SLURM would."""

from __future__ import annotations

import json
import os

from tests.support.jaxgen import jaxgen


def fake_slurm(tmp_path, monkeypatch, squeue: str = "", sacct: str = ""):
    """squeue and sacct that print these lines (squeue's -o "%i|%j|%T|%r|%M|%o|%Z", sacct's -P -o
    "JobID,JobName,State,ExitCode,WorkDir") whatever they are asked."""
    for name, lines in (("squeue", squeue), ("sacct", sacct)):
        (tmp_path / f"{name}.out").write_text(lines)
        (tmp_path / name).write_text(f"#!/bin/sh\nexec cat '{tmp_path}/{name}.out'\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def status(*args: str) -> dict:
    result = jaxgen("status", "demo", "--slurm", "-o", "json", *args)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    return json.loads(result.stdout)


def test_the_newest_queued_job_of_the_name_is_shown_and_an_id_not_in_ascii_digits_is_none(tmp_path, monkeypatch):
    fake_slurm(tmp_path, monkeypatch, squeue="\u00b2|demo|RUNNING|None|1:00||/w\n7|demo|PENDING|Priority|0:00||/w\n"
                                             "5_1|demo|RUNNING|None|1:00||/w\n")
    assert status()["queue"] == "job 7: PENDING (Priority)"
