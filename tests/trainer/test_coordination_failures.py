"""Every coordination or collective failure of a distributed run ends with the peer-lost exit code and
one line naming its cause, never exit 1 or a signal: each is injected for real into 2 trainer processes
on 127.0.0.1 (a coordinator stopped with SIGSTOP, a follower stopped, a coordinator restarted, a peer
killed mid all-reduce: tests/trainer/test_multiprocess.py), under hard timeouts."""

import os
import signal
import time

import pytest

from tests.support.paths import MNIST_DIR
from tests.support.procs import free_port, kill, start, trainer_argv, wait_all, wait_for_text
from trainer import exit_codes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HEARTBEAT = 5


def launch(tmp_path, port: int, rank: int, tag: str = ""):
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}
    args = ["train", "--data-dir", str(MNIST_DIR), "--no-download", "--mlp-hidden-sizes", "256,256",
            "--epochs", "50", "--log-every", "5", "--heartbeat-timeout", str(HEARTBEAT), "--init-timeout", "60",
            "--metrics-port", "0"]
    return start(trainer_argv(*args), tmp_path / f"rank{rank}{tag}.log", env)


def inject(tmp_path, fault):
    """Start 2 processes, apply `fault(procs, port)` once rank 0 trains; the survivor(s) it returns
    must exit with the peer-lost code within the heartbeat timeout and a margin."""
    port = free_port()
    procs = [launch(tmp_path, port, 0), launch(tmp_path, port, 1)]
    try:
        wait_for_text(procs[0], "batch 10/", 180)
        survivors = fault(procs, port)
        injected = time.monotonic()
        codes = wait_all(survivors, HEARTBEAT + 30)
        elapsed = time.monotonic() - injected
    finally:
        for proc in procs:
            try:
                os.killpg(proc.popen.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            kill(proc)
    for proc, code in zip(survivors, codes):
        assert code == exit_codes.PEER_LOST, proc.output[-3000:]
        errors = [line for line in proc.output.splitlines() if ": error: " in line]
        assert len(errors) == 1 and errors[0].startswith("Rank "), proc.output[-3000:]
        assert "training completed" not in proc.output
    assert elapsed <= HEARTBEAT + 20, elapsed
    return survivors


@pytest.mark.parametrize("stopped, cause", [
    (0, "the coordinator stopped answering heartbeats (it died, was stopped or restarted): DEADLINE_EXCEEDED"),
    (1, "a peer stopped sending heartbeats to the coordinator (it died, was stopped or was cut off): UNAVAILABLE"),
])
def test_a_stopped_process_ends_its_peer_with_peer_lost(tmp_path, stopped, cause):
    def stop(procs, port):
        os.killpg(procs[stopped].popen.pid, signal.SIGSTOP)
        return [procs[1 - stopped]]

    survivor, = inject(tmp_path, stop)
    assert f"Rank {1 - stopped}: error: {cause}" in survivor.output


def test_coordinator_restarted_ends_the_follower_with_peer_lost(tmp_path):
    def restart_coordinator(procs, port):
        kill(procs[0])
        procs.append(launch(tmp_path, port, 0, "-restarted"))
        return [procs[1]]

    follower, = inject(tmp_path, restart_coordinator)
    assert "Rank 1: error: " in follower.output
