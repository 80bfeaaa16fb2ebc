"""scripts/run.sh --local: the same build folder, run as local JAX processes. Runs without a cluster,
so make test runs it in its CPU lane, not beside the engines."""

from __future__ import annotations

import os
import subprocess

import pytest

from generator.targets import LOCAL
from tests.support.paths import EXAMPLES_DIR, MNIST_DIR, SCRIPTS_DIR

# Each starts two JAX processes: seconds at least (make test-fast leaves them out).
pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_run_local_trains_the_prepared_variables(tmp_path):
    build = tmp_path / "build"
    prepare = subprocess.run(
        [str(SCRIPTS_DIR / "prepare.sh"), str(EXAMPLES_DIR / "seed.json"), "-o", str(build),
         "--set", "name=e2e-local", "--set", "local_device_count=1", "--set", "training.epochs=1",
         "--set", f"data.mirror={MNIST_DIR.as_uri()}/"],
        capture_output=True, text=True, timeout=60)
    assert prepare.returncode == 0, prepare.stderr
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([str(SCRIPTS_DIR / "run.sh"), "--local", str(build)], capture_output=True,
                          text=True, timeout=540, env=env, start_new_session=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    for rank in (0, 1):  # hosts_count 2 from seed.json: two processes, each finished training
        assert f"Rank {rank}: training completed." in output


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", LOCAL)
def test_run_local_runs_your_own_program(tmp_path, target):
    """program.command in place of the trainer: the example program finds its cluster from each
    target's variables with trainer.distributed.initialize and all-reduces across 2 processes."""
    build = tmp_path / "build"
    prepare = subprocess.run(
        [str(SCRIPTS_DIR / "prepare.sh"), str(EXAMPLES_DIR / "seed.json"), "-o", str(build), "--target", target,
         "--set", "name=e2e-byo", "--set", "local_device_count=1",
         "--set", "program.command={python,-m,trainer.examples.allreduce}"],
        capture_output=True, text=True, timeout=60)
    assert prepare.returncode == 0, prepare.stderr
    proc = subprocess.run([str(SCRIPTS_DIR / "run.sh"), "--local", str(build)], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ, JAX_PLATFORMS="cpu"), start_new_session=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    for rank in (0, 1):
        assert f"process {rank}/2: 1 local of 2 devices, psum of process ids = 1 (expected 1)" in output
