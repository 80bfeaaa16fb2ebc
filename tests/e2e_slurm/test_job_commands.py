"""`jaxgen status|list|logs --slurm` of a real batch job: while it trains, squeue's state and the
figures of its outputs directory (step, ETA); after it, the result and where the results are."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .slurm import render_script
from .test_training import TRAIN_TIMEOUT, outputs, variables

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
JAXGEN = str(Path(sys.executable).with_name("jaxgen"))


def jaxgen(slurm, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([JAXGEN, *args, "--slurm"], env=slurm.env, capture_output=True, text=True, timeout=timeout)


def test_status_list_and_logs_of_a_batch_job(slurm, tmp_path):
    name = "e2e-status"
    values = variables(tmp_path, name)
    values["training"]["epochs"] = 2
    job = slurm.sbatch(render_script(values, tmp_path), cwd=tmp_path)
    deadline = time.monotonic() + TRAIN_TIMEOUT
    while True:
        assert time.monotonic() < deadline, slurm.log_tail()
        proc = jaxgen(slurm, "status", name, "-o", "json")
        assert proc.returncode == 0, proc.stderr
        during = json.loads(proc.stdout)
        if during.get("eta_seconds") or during["phase"] not in ("Queued", "Running"):
            break
        time.sleep(1)
    assert during["phase"] == "Running" and during["kind"] == "SLURM", during
    assert during["queue"] == f"job {job}: RUNNING" and during["results"] == str(outputs(tmp_path, name))
    assert 0 < during["step"] < during["total_steps"] == 2 * 234 and during["eta_seconds"] > 0, during
    listed = jaxgen(slurm, "list").stdout.splitlines()
    assert any(line.split()[:3] == [name, "SLURM", "Running"] for line in listed), listed

    logs = jaxgen(slurm, "logs", name, timeout=TRAIN_TIMEOUT)  # follows until the job leaves the queue
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert "Rank 0: training completed." in lines and not any(line.startswith("Rank 1:") for line in lines)
    slurm.wait(job, 60)

    after = json.loads(jaxgen(slurm, "status", name, "-o", "json").stdout)
    assert after["phase"] == "Succeeded" and after["step"] == after["total_steps"], after
    assert after["result"].startswith("test accuracy 0.9") and "eta_seconds" not in after, after
    assert after["results"] == str(outputs(tmp_path, name))

    missing = jaxgen(slurm, "status", "e2e-nothing")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no SLURM job by that name" in missing.stderr


def test_status_and_list_say_why_a_job_waits(slurm, tmp_path):
    """A job that wants the whole node while another holds it: squeue's reason, in words."""
    held = slurm.run("sbatch", "--parsable", "--exclusive", "-J", "e2e-hog", "-o", "/dev/null", "--wrap", "sleep 300",
                     cwd=tmp_path).stdout.strip()
    waits = slurm.run("sbatch", "--parsable", "--exclusive", "-J", "e2e-waits", "-o", "/dev/null", "--wrap", "true",
                      cwd=tmp_path).stdout.strip()
    started = time.monotonic()
    try:
        deadline = time.monotonic() + 60
        while True:
            got = json.loads(jaxgen(slurm, "status", "e2e-waits", "-o", "json").stdout)
            if got.get("cause", "").endswith("(squeue: Resources)"):
                break
            assert time.monotonic() < deadline, (got, slurm.log_tail())
            time.sleep(0.5)
        print(f"cause: {got['cause']} ({time.monotonic() - started:.1f} s)")
        assert got["phase"] == "Queued", got
        assert got["cause"] == "waiting: the resources it asks for are busy (squeue: Resources)", got
        listed = jaxgen(slurm, "list").stdout.splitlines()
        assert listed[0].split()[-1] == "CAUSE", listed
        [row] = [line for line in listed if line.split()[0] == "e2e-waits"]
        assert row.endswith(f"  {got['cause']}"), listed
        assert "cause" not in json.loads(jaxgen(slurm, "status", "e2e-hog", "-o", "json").stdout)  # it runs
    finally:
        slurm.run("scancel", held, waits, check=False)
