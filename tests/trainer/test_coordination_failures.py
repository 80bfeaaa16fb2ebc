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


def launch(tmp_path, port: int, rank: int, tag: str = "", env: dict | None = None):
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank),
           **(env or {})}
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


def test_a_lost_peers_wait_holds_the_exit_until_a_stop_signal(tmp_path):
    """JAX_TRAINING_PEER_LOST_WAIT (a JobSet's pods: docs/kubernetes.md): the survivor of a killed peer
    exits with the peer-lost code only after the wait, which a stop signal cuts short."""
    wait = 60
    port = free_port()
    procs = [launch(tmp_path, port, 0, env={"JAX_TRAINING_PEER_LOST_WAIT": str(wait)}), launch(tmp_path, port, 1)]
    try:
        wait_for_text(procs[0], "batch 10/", 180)
        kill(procs[1])
        wait_for_text(procs[0], f"Rank 0: waiting {wait} s before exiting", HEARTBEAT + 30)
        waiting = time.monotonic()
        time.sleep(3)
        assert procs[0].popen.poll() is None, procs[0].output[-3000:]  # without the wait it exits at once
        os.killpg(procs[0].popen.pid, signal.SIGTERM)
        code, = wait_all(procs[:1], 30)
    finally:
        for proc in procs:
            kill(proc)
    assert code == exit_codes.PEER_LOST and time.monotonic() - waiting < wait, procs[0].output[-3000:]
    errors = [line for line in procs[0].output.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith("Rank 0: error: "), procs[0].output[-3000:]


def test_a_bad_peer_lost_wait_is_one_line_and_the_config_code(tmp_path):
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{free_port()}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    for value in ("ten", "-1", "nan", "inf", "3601"):
        proc = start(trainer_argv("train", "--data-dir", str(MNIST_DIR), "--no-download"),
                     tmp_path / f"bad-{value}.log", {**env, "JAX_TRAINING_PEER_LOST_WAIT": value})
        code, = wait_all([proc], 60)
        assert code == exit_codes.CONFIG, proc.output
        assert proc.output.strip() == (f"Rank 1: error: JAX_TRAINING_PEER_LOST_WAIT={value!r} must be seconds "
                                       "from 0 to 3600"), proc.output
