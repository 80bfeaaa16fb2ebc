"""Attempt fencing (trainer/fencing.py) with real processes on 127.0.0.1: a process of an older attempt
is refused by a newer attempt's coordinator and says so in one line, and one that comes once the gang
has formed never joins it; the newer gang trains on either way. Hard timeouts throughout. A follower's
reading of the coordinator's answer is checked alone, on a socket pair."""

import re
import signal
import socket
import time

import pytest

from tests.support.procs import free_port, kill, small_train_args, start, trainer_argv, wait_all, wait_for_text
from trainer import exit_codes, fencing
from trainer.errors import PeerLostError
from trainer.fencing import READ_SECONDS, attempt_of, hello

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def launch(tmp_path, port, rank, attempt, tag, *extra):
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank),
           "JAX_TRAINING_ATTEMPT": attempt}
    argv = trainer_argv(*small_train_args(tmp_path / "c", "--metrics-port", "0", "--init-timeout", "120", *extra))
    return start(argv, tmp_path / f"{tag}.log", env)


def test_a_process_of_an_older_attempt_is_refused_and_the_newer_gang_trains(tmp_path):
    port = free_port()
    coordinator = launch(tmp_path, port, 0, "2", "rank0-attempt2")
    stale = launch(tmp_path, port, 1, "1", "rank1-attempt1")
    procs = [coordinator, stale]
    try:
        assert wait_all([stale], 120) == [exit_codes.PEER_LOST], stale.output[-3000:]
        follower = launch(tmp_path, port, 1, "2", "rank1-attempt2")
        procs.append(follower)
        assert wait_all([coordinator, follower], 240) == [0, 0], coordinator.output[-3000:] + follower.output[-3000:]
    finally:
        for proc in procs:
            kill(proc)
    errors = [line for line in stale.output.splitlines() if "error:" in line]
    assert errors == ["Rank 1: error: this process belongs to attempt 1 of the job, the coordinator runs the newer "
                      "attempt 2: a process of an older attempt cannot join it"], stale.output[-3000:]
    assert "refused a process at the coordinator: process 1 of attempt 1, this is attempt 2" in coordinator.output
    assert "training completed." in follower.output


def test_a_process_that_comes_once_the_gang_has_formed_never_joins_it(tmp_path):
    port = free_port()
    # Long enough (minutes) to be training all the while the late process starts and tries, however
    # slow its start; the gang is stopped after.
    gang = [launch(tmp_path, port, rank, "3", f"rank{rank}", "--epochs", "2000") for rank in range(2)]
    late = None
    try:
        wait_for_text(gang[0], "batch 8/", 120)  # the gang has formed
        late = launch(tmp_path, port, 1, "3", "rank1-late", "--init-timeout", "5")
        assert wait_all([late], 90) == [exit_codes.COORDINATOR], late.output[-3000:]
        # Undisturbed: the gang still trains, and a stop signal to one ends both at one agreed step.
        assert [p.popen.poll() for p in gang] == [None, None], gang[0].output[-3000:] + gang[1].output[-3000:]
        gang[1].popen.send_signal(signal.SIGTERM)
        assert wait_all(gang, 120) == [exit_codes.PREEMPTED] * 2, gang[0].output[-3000:] + gang[1].output[-3000:]
    finally:
        for proc in gang + ([late] if late else []):
            kill(proc)
    assert (f"coordinator 127.0.0.1:{port} did not come up within the init timeout of 5 s (last error: it did not "
            "admit this process") in late.output
    assert "Traceback" not in late.output
    stops = [re.findall(r"every process stops after step (\d+)", proc.output) for proc in gang]
    assert len(stops[0]) == 1 and stops[0] == stops[1], stops


def test_a_gang_that_gathers_slowly_forms(tmp_path):
    """Process 1 waits longer for the last process than a hello's read timeout: it is answered all
    the same, and the 3 processes train to the end."""
    port, procs = free_port(), []
    try:
        for rank in range(3):
            env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "3",
                   "JAX_PROCESS_ID": str(rank), "JAX_TRAINING_ATTEMPT": "0"}
            argv = trainer_argv(*small_train_args(tmp_path / "c", "--metrics-port", "0", "--batch-size", "48"))
            procs.append(start(argv, tmp_path / f"rank{rank}.log", env))
            if rank == 1:
                time.sleep(READ_SECONDS + 5)
        assert wait_all(procs, 300) == [0, 0, 0], "\n".join(p.output[-2000:] for p in procs)
    finally:
        for proc in procs:
            kill(proc)


def test_the_attempt_comes_from_the_launcher():
    assert attempt_of({"JAX_TRAINING_ATTEMPT": "4", "SLURM_RESTART_COUNT": "1"}) == "4"
    assert attempt_of({"SLURM_RESTART_COUNT": "1"}) == "1"
    assert attempt_of({"SLURM_JOB_ID": "7"}) == "0"  # SLURM's first start: no requeue count yet
    assert attempt_of({}) == ""


@pytest.mark.parametrize("mine,theirs", [("1", "\u00b2"), ("\u00b2", "3"), ("1", "\u0663"), ("1", "+2"), ("1", " 2"),
                                         ("1", "2_0"), ("a", "b"), ("", "2"), ("2", "1"), ("2", "2")])
def test_a_follower_refused_by_an_attempt_it_cannot_tell_older_keeps_waiting(mine, theirs):
    ours, coordinator = socket.socketpair()
    with ours, coordinator:
        coordinator.sendall(f"refused attempt={theirs}\n".encode())
        assert hello(ours, 1, mine, time.monotonic() + 5) is False


def test_a_follower_refused_by_a_newer_attempt_ends():
    ours, coordinator = socket.socketpair()
    with ours, coordinator:
        coordinator.sendall(b"refused attempt=10\n")
        with pytest.raises(PeerLostError, match="attempt 9 of the job, the coordinator runs the newer attempt 10"):
            hello(ours, 1, "9", time.monotonic() + 5)



@pytest.mark.parametrize("mine,theirs,older", [("9" * 5000, "1" + "0" * 5000, True), ("1" + "0" * 5000, "9" * 5000, False),
                                               ("0" * 5000 + "9", "10", True), ("7" * 5000, "7" * 5000, False),
                                               ("0", "0" * 5000, False), ("99", "100", True)])
def test_attempt_counts_of_thousands_of_digits_compare(mine, theirs, older):
    """int() refuses more than 4300 digits (leading zeros count): comparing such an attempt raised
    ValueError; counts now compare as numbers at any length."""
    assert fencing._is_older(mine, theirs) is older


def test_a_follower_of_an_attempt_of_thousands_of_digits_refused_keeps_waiting():
    """The follower's own attempt (its launcher's variable) of 5000 digits ended in a ValueError
    traceback when the coordinator refused it; it is newer than the coordinator's 1."""
    ours, coordinator = socket.socketpair()
    with ours, coordinator:
        coordinator.sendall(b"refused attempt=1\n")
        assert hello(ours, 1, "9" * 5000, time.monotonic() + 5) is False
