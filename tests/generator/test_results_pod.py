"""run.sh's results pod (release/results-pod.json) goes as soon as it is deleted: its process is the
container's PID 1, which ignores SIGTERM unless it handles it, and clean.sh waited out the pod's grace
period (30 s) after every run with a claim."""

from __future__ import annotations

import subprocess
import sys
import time

from generator.engines.kubernetes import release
from generator.values import load_values
from tests.support.paths import EXAMPLES_DIR


def _stops_on_sigterm(code: str, wait: float) -> bool:
    """Whether `python -c code`, PID 1 of a PID namespace of its own, exits within `wait` s of SIGTERM."""
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while not (inner := subprocess.run(["pgrep", "-P", str(outer.pid)], capture_output=True,
                                           text=True, check=False).stdout.split()):
            assert time.monotonic() < deadline, "the process did not start"
            time.sleep(0.05)
        time.sleep(0.3)  # past Python's start, into the sleep
        subprocess.run(["kill", "-TERM", inner[0]], check=True)
        try:
            outer.wait(timeout=wait)
            return True
        except subprocess.TimeoutExpired:
            return False
    finally:
        outer.kill()
        outer.wait()


def test_the_results_pod_stops_at_once_when_deleted():
    values = load_values([str(EXAMPLES_DIR / "cpu-local.json")], sets=["persistence.enabled=true"])
    [container] = release.results_pod(values)["spec"]["containers"]
    assert container["command"][:2] == ["python", "-c"]
    assert _stops_on_sigterm(container["command"][2], wait=5)
    # the check can fail: a sleep with no handler outlives SIGTERM as PID 1
    assert not _stops_on_sigterm("import time; time.sleep(900)", wait=1)
