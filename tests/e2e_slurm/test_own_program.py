"""A program of the user's own, unchanged, as program.command on the real SLURM: the seed programs
(../shared/seed-programs) call jax.distributed.initialize() with no arguments, which JAX answers from
srun's variables. They run with the process counts their guide gives and print what it expects.
This project is not importable by them: PYTHONPATH is not set and they are run from their directory."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DIR

from .slurm import render_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROGRAMS = SHARED_DIR / "seed-programs"


def own_program(tmp_path: Path, name: str, program: str, tasks: int) -> dict:
    return {
        "name": name,
        "target": "slurm",
        "hosts_count": tasks,
        "local_device_count": 1,
        "accelerator": "cpu",
        "program": {"command": [sys.executable, str(PROGRAMS / program)]},
        "checkpoint": {"dir": str(tmp_path / "checkpoints")},
        "data": {"dir": str(tmp_path / "data")},
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "slurm": {"nodes": 1, "time": "00:10:00", "output": str(tmp_path / "%x-%j.out")},
    }


def run(slurm, tmp_path: Path, name: str, program: str, tasks: int) -> str:
    script = render_script(own_program(tmp_path, name, program, tasks), tmp_path)
    job = slurm.sbatch(script, cwd=PROGRAMS)
    slurm.wait(job, 420)
    output = (tmp_path / f"{name}-{job}.out").read_text(errors="replace")
    assert slurm.accounting(job) == ("COMPLETED", "0:0"), output + slurm.log_tail()
    assert "Traceback" not in output, output
    return output


def test_query_v1_unchanged_on_4_tasks(slurm, tmp_path):
    output = run(slurm, tmp_path, "own-query", "query_v1.py", 4)
    local = re.findall(r"^# Local devices: \[ (\d+) \]", output, re.M)
    global_ = re.findall(r"^# Global devices:\[ (\d+),", output, re.M)
    assert local == ["1"] * 4 and global_ == ["4"] * 4, output


def test_allreduce_unchanged_on_8_tasks(slurm, tmp_path):
    output = run(slurm, tmp_path, "own-allreduce", "allreduce.py", 8)
    assert output.count("Total devices: 8  |  Devices per task: 1") == 8, output
    ranks = sorted(int(m) for m in re.findall(r"^Process (\d+) has y=\[8\.\]$", output, re.M))
    assert ranks == list(range(8)), output
