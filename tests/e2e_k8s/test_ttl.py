"""run.sh with ttl_seconds_after_finished 0: the Job controller removes the job as it finishes, and
run.sh still reports how it finished (from the state its watch saw last), not a deletion."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import FAIL_INDEX, READY_DELAY, SCRIPTS, finish, prepare, start_run, wait_until


@pytest.mark.timeout(900)  # the first test of a session also waits for the control plane
@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_a_job_removed_as_it_finishes_is_reported_as_it_finished(cluster, build_dir, outcome):
    name = f"e2e-ttl-{outcome}"
    annotation = (f'annotations={{"{FAIL_INDEX}": "0"}}' if outcome == "failed"
                  else f'annotations={{"{READY_DELAY}": "3s"}}')
    prepare(cluster, build_dir, name, "hosts_count=2", "backoff_limit=0", "ttl_seconds_after_finished=0", annotation)
    try:
        code, output = finish(start_run(cluster, build_dir, "--no-logs"))
        assert "deleted while waiting" not in output, output
        if outcome == "succeeded":
            # whether the watch's last look came before or after the removal is a race; both say how it ended
            assert code == 0 and "succeeded (2 hosts)" in output, output
        else:
            assert code == 1 and "FAILED (" in output, output
        wait_until(f"job {name} removed by its ttl", lambda: cluster.kubectl(
            "get", "job", name, "--ignore-not-found", "-o", "name").stdout.strip() == "", timeout=30)
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)


def watches_in(group: int) -> list[int]:
    """The kubectl watches running in process group `group` (a spawn()ed run.sh's)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"--watch" in (entry / "cmdline").read_bytes().split(b"\0") \
                    and os.getpgid(int(entry.name)) == group:
                pids.append(int(entry.name))
        except OSError:  # ended meanwhile
            pass
    return pids


@pytest.mark.timeout(900)
def test_a_watch_the_server_ends_is_watched_again(cluster, build_dir):
    """The API server ends every watch after its request timeout (30 to 60 min): a job removed as it
    finishes after that is still reported as it finished, not as deleted."""
    name = "e2e-ttl-rewatch"
    prepare(cluster, build_dir, name, "hosts_count=2", "ttl_seconds_after_finished=0",
            f'annotations={{"{READY_DELAY}": "15s"}}')
    try:
        run = start_run(cluster, build_dir, "--no-logs")
        first = wait_until("run.sh's watch", lambda: watches_in(run.pid), run=run)
        for pid in first:
            os.kill(pid, signal.SIGTERM)  # as the server ends it
        wait_until("the watch started again", lambda: set(watches_in(run.pid)) - set(first), run=run)
        code, output = finish(run)
        assert code == 0 and "succeeded (2 hosts)" in output and "deleted while waiting" not in output, output
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
