"""`jaxgen status` of a real job on the real node: while it trains, the step, the ETA and the loss
from process 0's metrics endpoint (read through the API server's pod proxy); after it, the result
(rank 0's termination message) and where the results are, then fetched by run.sh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import SCRIPTS, finish, prepare, start_run, wait_until
from tests.e2e_k8s.real import PERSISTENCE

JAXGEN = str(Path(sys.executable).with_name("jaxgen"))


@pytest.mark.timeout(900)
def test_status_shows_the_eta_while_it_trains_and_the_result_after(real, tmp_path):
    cluster, sets = real
    name = "real-status"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, *PERSISTENCE, "checkpoint.every_steps=100", base="cpu-local.json",
            target="jobset")
    run = start_run(cluster, build, "--no-logs", timeout=600)

    def status() -> dict:
        proc = subprocess.run([JAXGEN, "status", name, "--namespace", cluster.namespace, "-o", "json"],
                              env=cluster.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    try:
        during = wait_until("status with an ETA", lambda: (lambda s: s if s.get("eta_seconds") and
                                                           s.get("step", 0) > 0 else None)(status()),
                            timeout=400, interval=2)
        assert during["phase"] == "Running" and during["kind"] == "JobSet" and during["source"] == "metrics endpoint"
        assert during["total_steps"] == 468 and 0 < during["step"] < 468 and during["loss"] > 0, during
        assert during["pods"] == "2/2 running" and during["restarts"] == 0, during
        text = subprocess.run([JAXGEN, "status", name, "--namespace", cluster.namespace], env=cluster.env,
                              capture_output=True, text=True, timeout=60).stdout
        assert "phase:      Running" in text and ", ETA " in text and "ETA unknown" not in text, text
        code, output = finish(run, timeout=660)
        assert code == 0, output[-6000:]
    finally:
        if run.poll() is None:
            run.kill()
    after = status()
    assert after["phase"] == "Succeeded" and "eta_seconds" not in after, after
    assert after["result"].startswith("test accuracy 0.9"), after
    assert after["results"] == f"/checkpoints/{name} on claim {name}-outputs (scripts/run.sh fetches it; then " \
                               "jaxgen results DIR)", after
    assert (build / "results" / name / "latest" / "summary.json").exists()
    cluster.run([SCRIPTS / "clean.sh", "--delete-outputs", build], timeout=180, check=False)
