"""`jaxgen status --slurm` read from squeue and sacct: fakes of both on PATH print what SLURM would."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.jaxgen import jaxgen
from trainer import exit_codes


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


@pytest.mark.parametrize("exit_code,reason", [
    ("5:0", f"exit code 5: {exit_codes.BY_NAME['device-count'].meaning}"),
    ("142:0", f"exit code 142: {exit_codes.BY_NAME['hang'].meaning}"),
    ("137:0", "exit code 137 (killed by SIGKILL)"),
    ("0:9", "killed by SIGKILL"),
    ("1:15", "killed by SIGTERM"),
    ("bad", "exit code bad"),
])
def test_a_failed_jobs_exit_code_is_said_as_the_trainer_means_it(tmp_path, monkeypatch, exit_code, reason):
    """sacct's ExitCode is CODE:SIGNAL: the trainer's meaning of the code, or the signal that killed it."""
    fake_slurm(tmp_path, monkeypatch, sacct=f"12|demo|FAILED|{exit_code}|/w\n")
    assert status() == {"kind": "SLURM", "name": "demo", "phase": "Failed", "queue": "job 12: FAILED", "reason": reason}
