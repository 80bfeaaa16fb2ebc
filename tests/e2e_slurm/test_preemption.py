"""A stop signal on the real SLURM: `scancel --signal=TERM` reaches both tasks of a running job;
they checkpoint one agreed step and exit 143; with slurm.requeue the script requeues the job,
which comes back and resumes from that step to completion."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from trainer import checkpoint

from .slurm import rank_lines, render_script
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
    slurm.run("scancel", "--signal=TERM", str(job))
    signalled = time.monotonic()
    slurm.wait(job, TRAIN_TIMEOUT + 300)  # the requeued run included (SLURM delays its start)
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
