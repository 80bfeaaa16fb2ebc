"""scripts/slurm/up.sh is idempotent: on a running SLURM it changes nothing and prints the same
environment; every daemon it started is alive and owned by this state directory."""

from __future__ import annotations

import subprocess
import time

from .slurm import SCRIPTS


def test_up_again_is_a_no_op(slurm):
    pids = {f.stem: f.read_text() for f in slurm.state_dir.glob("*.pid")}
    assert {"munged", "slurmctld", "slurmd", "reaper"} <= set(pids)
    started = time.monotonic()
    proc = subprocess.run([str(SCRIPTS / "up.sh")], env=slurm.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 10
    assert "already running" in proc.stderr
    assert proc.stdout.strip() == f"export SLURM_CONF={slurm.env['SLURM_CONF']}"
    assert {f.stem: f.read_text() for f in slurm.state_dir.glob("*.pid")} == pids


def test_node_is_idle_with_its_declared_resources(slurm):
    out = slurm.run("scontrol", "show", "node").stdout
    assert "State=IDLE" in out
    assert "CPUTot=8" in out and "Gres=gpu:4" in out
    # Jobs run on it: two tasks, each with its own rank.
    ranks = slurm.run("srun", "-n", "2", "bash", "-c", "echo $SLURM_PROCID", timeout=60).stdout.split()
    assert sorted(ranks) == ["0", "1"]
