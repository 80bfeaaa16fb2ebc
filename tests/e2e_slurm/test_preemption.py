"""A stop signal on the real SLURM: `scancel --signal=TERM` reaches both tasks of a running job;
they checkpoint one agreed step and exit 143; with slurm.requeue the script requeues the job,
which comes back (`jaxgen status` counts it: requeued 1 time, attempt 2) and resumes from that step
to completion."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from trainer import checkpoint
from trainer.exit_codes import COORDINATOR

from .slurm import job_processes, rank_lines, render_script
from .test_job_commands import jaxgen
from .test_training import TRAIN_TIMEOUT, job_output, metrics, outputs, variables

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _wait_for_step(slurm, job: int, tmp_path: Path, name: str, step: int, timeout: float) -> None:
    """Until metrics.jsonl records a step at or past `step` (the job is training)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = outputs(tmp_path, name) / "metrics.jsonl"
        if path.exists() and any(r.get("step", 0) >= step for r in metrics(tmp_path, name) if r["event"] == "step"):
            return
        assert slurm.in_queue(job), f"job {job} ended before step {step}:\n{slurm.log_tail()}"
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not reach step {step} in {timeout}s")


def _task_of_rank(job: int, rank: int) -> tuple[list[str], dict]:
    """The command line and environment of a running task of the job."""
    for pid, env in job_processes(job, tasks_only=True).items():
        if env.get("SLURM_PROCID") == str(rank):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            return [a.decode() for a in argv], env
    raise AssertionError(f"job {job} has no running task of rank {rank}")


def _wait_for_line(slurm, job: int, tmp_path: Path, name: str, text: str, timeout: float) -> None:
    """Until the job's output holds `text`."""
    deadline = time.monotonic() + timeout
    while text not in (job_output(tmp_path, name, job) if (tmp_path / f"{name}-{job}.out").exists() else ""):
        assert slurm.in_queue(job), f"job {job} ended before {text!r}:\n{slurm.log_tail()}"
        assert time.monotonic() < deadline, f"job {job}: no {text!r} after {timeout}s"
        time.sleep(0.2)


def test_scancel_signal_checkpoints_and_the_requeued_job_resumes(slurm, tmp_path):
    name = "e2e-requeue"
    values = variables(tmp_path, name)
    values["checkpoint"]["every_steps"] = 0  # only the stop signal's checkpoint is written mid-run
    values["slurm"]["requeue"] = True
    script = render_script(values, tmp_path)
    text = script.read_text()
    assert "#SBATCH --requeue" in text and "#SBATCH --signal=USR1@120" in text

    job = slurm.sbatch(script, cwd=tmp_path)
    _wait_for_step(slurm, job, tmp_path, name, 100, TRAIN_TIMEOUT)
    rank1 = _task_of_rank(job, 1)
    slurm.run("scancel", "--signal=TERM", str(job))
    signalled = time.monotonic()
    # A stale rank: rank 1 of the first start, started again by hand once the requeued job's gang
    # has formed. It never joins it, nor stalls it: it ends at its init timeout, saying so.
    # (One that comes while a newer gang is forming is told it is the older: tests/trainer/test_fencing.py.)
    _wait_for_line(slurm, job, tmp_path, name, "Rank 0: resuming from the checkpoint", TRAIN_TIMEOUT + 300)
    status = json.loads(jaxgen(slurm, "status", name, "-o", "json").stdout)  # SLURM's restart count
    print(f"cause: {status.get('cause')}")
    assert status["cause"] == "requeued 1 time, attempt 2" and status["restarts"] == 1, status
    stale = subprocess.run(rank1[0] + ["--init-timeout", "15", "--metrics-port", "0"], env=rank1[1], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert stale.returncode == COORDINATOR and "did not come up within the init timeout" in stale.stdout, \
        stale.stdout[-3000:]
    slurm.wait(job, TRAIN_TIMEOUT)
    output = job_output(tmp_path, name, job)
    assert slurm.accounting(job) == ("COMPLETED", "0:0"), output + slurm.log_tail()

    stops = {rank: re.findall(r"every process stops after step (\d+)", "\n".join(rank_lines(output, rank)))
             for rank in (0, 1)}
    assert len(stops[0]) == 1 and stops[0] == stops[1], output
    step = int(stops[0][0])
    assert 100 <= step < 234
    assert "Rank 0: preempted (received SIGTERM)" in output and "Rank 1: preempted (received SIGTERM)" in output
    assert f"job {job}: stopped with a checkpoint (exit 143); requeueing" in output
    assert "(start 1)" in output  # the same job id, started again by SLURM
    assert f"Rank 0: resuming from the checkpoint of step {step}" in output
    assert output.count("training completed.") == 2  # both ranks of the requeued run
    events = [(r["event"], r["step"]) for r in metrics(tmp_path, name) if r["event"] in ("start", "preempted", "end")]
    assert events == [("start", 0), ("preempted", step), ("start", step), ("end", 234)], events
    assert checkpoint.list_steps(outputs(tmp_path, name) / "checkpoints")[-1] == 234
    print(f"job {job}: stopped at step {step}, requeued, completed {time.monotonic() - signalled:.0f} s after the signal")
