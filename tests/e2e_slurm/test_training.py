"""MNIST trained by the rendered sbatch script on the real SLURM: 2 tasks x 1 CPU device.

Data comes through a file:// mirror of ../shared/data/mnist, so the sha256-verified download path
runs without internet. A task SIGKILLed mid-run must fail the job promptly (srun
--kill-on-bad-exit), and submitting the same script again must resume from the checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import MNIST_DIR, REPO_ROOT
from trainer.cluster import SLURM_PORTS

from .slurm import job_processes, rank_lines, render_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# 1 epoch of batch 256 = 234 steps (about a minute on 2 shared cores).
TRAIN_TIMEOUT = 600
KILL_TO_END_LIMIT = 60  # seconds from the SIGKILL of one task to the job leaving the queue


def variables(tmp_path: Path, name: str) -> dict:
    return {
        "name": name,
        "target": "slurm",
        "hosts_count": 2,
        "local_device_count": 1,
        "accelerator": "cpu",
        "init_timeout_seconds": 120,
        "heartbeat_timeout_seconds": 10,
        "training": {"epochs": 1, "batch_size": 256, "learning_rate": 0.1},
        "data": {"dir": str(tmp_path / "data"), "download": True, "mirror": f"file://{MNIST_DIR}/"},
        "checkpoint": {"dir": str(tmp_path / "checkpoints"), "every_steps": 40},
        "env": [{"name": "PYTHONPATH", "value": str(REPO_ROOT)}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "slurm": {"nodes": 1, "time": "00:15:00", "python": sys.executable,
                  "output": str(tmp_path / "%x-%j.out")},
    }


def outputs(tmp_path: Path, name: str) -> Path:
    """The job's outputs directory: <checkpoint.dir>/<name>."""
    return tmp_path / "checkpoints" / name


def metrics(tmp_path: Path, name: str) -> list[dict]:
    path = outputs(tmp_path, name) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def job_output(tmp_path: Path, name: str, job_id: int) -> str:
    return (tmp_path / f"{name}-{job_id}.out").read_text(errors="replace")


def assert_both_ranks_from_slurm(output: str, job_id: int):
    port = SLURM_PORTS[job_id % len(SLURM_PORTS)]
    for rank in (0, 1):
        lines = rank_lines(output, rank)
        cluster = [line for line in lines if "cluster:" in line]
        assert cluster, f"rank {rank} logged nothing:\n{output}"
        assert f"process {rank}/2" in cluster[0]
        assert f"coordinator {socket.gethostname().split('.')[0]}:{port}" in cluster[0]
        assert "SLURM_PROCID" in cluster[0]
        assert f"Rank {rank}: training completed." in lines


def test_two_tasks_train_mnist_to_completion(slurm, tmp_path):
    name = "e2e-train"
    values = variables(tmp_path, name)
    script = render_script(values, tmp_path)
    job = slurm.sbatch(script, cwd=tmp_path)
    seconds = slurm.wait(job, TRAIN_TIMEOUT)
    output = job_output(tmp_path, name, job)
    assert slurm.accounting(job) == ("COMPLETED", "0:0"), output + slurm.log_tail()
    print(f"job {job}: 1 epoch, 2 tasks x 1 CPU device, {seconds:.1f} s in the queue")

    assert_both_ranks_from_slurm(output, job)
    records = metrics(tmp_path, name)
    start = records[0]
    assert (start["event"], start["step"], start["processes"]) == ("start", 0, 2)
    epoch = next(r for r in records if r["event"] == "epoch")
    assert epoch["test_accuracy"] > 0.9, epoch
    # The results stay on the shared filesystem: the summary and the exported model.
    summary = json.loads((outputs(tmp_path, name) / "summary.json").read_text())
    assert summary["test_accuracy"] == epoch["test_accuracy"] and summary["processes"] == 2
    assert (outputs(tmp_path, name) / "model" / "model.safetensors").is_file()
    assert records[-1] == {**records[-1], "event": "end", "step": start["total_steps"]}
    # The data came through the sha256-verified download from the file:// mirror.
    downloaded = sorted(p.name for p in (tmp_path / "data").glob("*.gz"))
    assert downloaded == sorted(p.name for p in MNIST_DIR.glob("*.gz"))


def _wait_for_checkpoint(slurm, job: int, ckpt_dir: Path, timeout: float) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(ckpt_dir.glob("ckpt-*.npz"))
        if found:
            return found[0]
        assert slurm.in_queue(job), f"job {job} ended before its first checkpoint"
        time.sleep(0.5)
    raise AssertionError(f"no checkpoint in {ckpt_dir} after {timeout}s")


def test_killed_task_fails_the_job_and_resubmission_resumes(slurm, tmp_path):
    name = "e2e-resume"
    script = render_script(variables(tmp_path, name), tmp_path)
    job = slurm.sbatch(script, cwd=tmp_path)
    _wait_for_checkpoint(slurm, job, outputs(tmp_path, name) / "checkpoints", TRAIN_TIMEOUT)

    victims = [pid for pid, env in job_processes(job, tasks_only=True).items() if env.get("SLURM_PROCID") == "1"]
    assert len(victims) == 1, f"expected one task 1 of job {job}, found {victims}"
    os.kill(victims[0], signal.SIGKILL)
    seconds = slurm.wait(job, KILL_TO_END_LIMIT)
    output = job_output(tmp_path, name, job)
    state, code = slurm.accounting(job)
    assert state == "FAILED" and code != "0:0", f"{state} {code}\n{output}"
    assert not job_processes(job), "trainer processes of the failed job are still running"
    print(f"job {job}: task 1 killed, job ended FAILED ({code}) {seconds:.1f} s later")
    assert "training completed" not in output

    saved = sorted(int(m.group(1)) for p in (outputs(tmp_path, name) / "checkpoints").glob("ckpt-*.npz")
                   if (m := re.match(r"ckpt-(\d+)\.npz$", p.name)))
    assert saved, "the killed run left no checkpoint"

    again = slurm.sbatch(script, cwd=tmp_path)
    slurm.wait(again, TRAIN_TIMEOUT)
    output = job_output(tmp_path, name, again)
    assert slurm.accounting(again) == ("COMPLETED", "0:0"), output + slurm.log_tail()
    resumed = re.search(r"^Rank 0: resuming from the checkpoint of step (\d+)$", output, re.M)
    assert resumed, f"the resubmission did not resume:\n{output}"
    step = int(resumed.group(1))
    assert step == saved[-1] and step > 0
    assert_both_ranks_from_slurm(output, again)
    starts = [r for r in metrics(tmp_path, name) if r["event"] == "start"]
    assert [s["step"] for s in starts] == [0, step]
    assert metrics(tmp_path, name)[-1]["step"] == starts[-1]["total_steps"]


def test_your_own_program_runs_as_the_tasks(slurm, tmp_path):
    """program.command replaces the trainer on the srun line: the example finds its 2 processes from
    SLURM's variables (trainer.distributed.initialize) and all-reduces across them."""
    values = variables(tmp_path, "e2e-byo")
    values["program"] = {"command": [sys.executable, "-m", "trainer.examples.allreduce"], "args": []}
    job = slurm.sbatch(render_script(values, tmp_path), cwd=tmp_path)
    slurm.wait(job, 300)
    output = job_output(tmp_path, "e2e-byo", job)
    assert slurm.accounting(job) == ("COMPLETED", "0:0"), output + slurm.log_tail()
    for rank in (0, 1):
        assert f"process {rank}/2: 1 local of 2 devices, psum of process ids = 1 (expected 1)" in output, output
