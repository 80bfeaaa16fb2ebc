"""A process restarted in place after its gang had met waits for its peers without the init timeout
(trainer/rejoin.py): real trainer processes on 127.0.0.1, each given a pod UID and a temporary directory
of its own, as an Indexed Job's pods are (the pod's UID and its /tmp emptyDir)."""

import socket
import subprocess

import pytest

from tests.support.procs import free_port, start, trainer_argv, wait_all, wait_for_text
from trainer import exit_codes
from trainer.rejoin import POD_UID_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

INIT_TIMEOUT = 3
WAITING = "restarted in place after its gang had met: waiting for every peer without the init timeout of 3 s"


def launch(tmp_path, port: int, rank: int, tag: str, uid: str | None = None):
    pod_tmp = tmp_path / f"pod{rank}-tmp"  # the pod's /tmp: kept across its container's restarts
    pod_tmp.mkdir(exist_ok=True)
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank),
           "TMPDIR": str(pod_tmp), POD_UID_ENV: uid or f"0c1d2e3f-uid-of-pod-{rank}"}
    return start(trainer_argv("query", "--init-timeout", str(INIT_TIMEOUT)), tmp_path / f"rank{rank}-{tag}.log", env)


def outlives_the_init_timeout(proc) -> bool:
    try:
        proc.popen.wait(timeout=INIT_TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_a_restarted_process_waits_past_the_init_timeout_and_a_new_pod_does_not(tmp_path):
    port = free_port()
    # the gang meets once
    assert wait_all([launch(tmp_path, port, 0, "first"), launch(tmp_path, port, 1, "first")], 120) == [0, 0]
    # each side restarted in place alone, its peer coming only past the init timeout: the follower
    # waiting for the coordinator, then the coordinator waiting for its follower
    for alone in (1, 0):
        port = free_port()
        waiting = launch(tmp_path, port, alone, f"restarted-{alone}")
        wait_for_text(waiting, WAITING, 60)
        assert outlives_the_init_timeout(waiting), waiting.output[-3000:]
        assert "still waiting for every peer: " in waiting.output  # a line for each round of the init timeout
        late = launch(tmp_path, port, 1 - alone, f"restarted-late-{alone}")
        assert wait_all([waiting, late], 120) == [0, 0], waiting.output[-3000:] + late.output[-3000:]
        assert WAITING in late.output  # its pod's gang had met too
    # a new pod (another UID beside the old mark) is a first start: the init timeout holds
    new = launch(tmp_path, free_port(), 0, "new-pod", uid="9a8b7c6d-a-new-pod")
    assert wait_all([new], 60) == [exit_codes.COORDINATOR], new.output[-3000:]
    assert WAITING not in new.output and "within the init timeout of 3 s" in new.output, new.output[-3000:]


def test_a_uid_that_is_no_uid_is_one_line_and_the_config_code(tmp_path):
    proc = launch(tmp_path, free_port(), 1, "bad", uid="../../etc/x")
    assert wait_all([proc], 60) == [exit_codes.CONFIG], proc.output
    assert proc.output.strip() == (f"Rank 1: error: {POD_UID_ENV}='../../etc/x' must be a pod's UID "
                                   "(letters, digits and '-')"), proc.output


def test_a_coordinator_that_went_away_without_closing_holds_a_waiting_follower_one_round_at_most(tmp_path):
    """A restarted follower's hello is taken by a coordinator that then goes away with the connection
    left open (its node powered off): the next round dials again and finds the new coordinator."""
    port = free_port()
    assert wait_all([launch(tmp_path, port, 0, "first"), launch(tmp_path, port, 1, "first")], 120) == [0, 0]
    port = free_port()
    gone = socket.create_server(("127.0.0.1", port))
    follower = launch(tmp_path, port, 1, "restarted")
    held = None
    try:
        gone.settimeout(60)
        held, _ = gone.accept()  # the hello arrives and is never answered
        gone.close()  # the listener goes, its accepted connection stays open
        held.settimeout(30)
        assert b"hello" in held.recv(512, socket.MSG_PEEK)
        coordinator = launch(tmp_path, port, 0, "new-coordinator", uid="5e6f7a8b-its-new-pod")
        assert wait_all([follower, coordinator], 120) == [0, 0], follower.output[-3000:] + coordinator.output[-3000:]
        assert "still waiting for every peer: " in follower.output, follower.output[-3000:]
    finally:
        if held is not None:
            held.close()
