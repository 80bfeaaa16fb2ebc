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
