"""Attempt fencing (trainer/fencing.py) with real processes on 127.0.0.1: a process of an older attempt
is refused by a newer attempt's coordinator and says so in one line, and one that comes once the gang
has formed never joins it; the newer gang trains on either way. Hard timeouts throughout. A follower's
reading of the coordinator's answer is checked alone, on a socket pair; process 0's door against
clients that are slow, silent, reset or talk garbage, with real sockets (and real processes for the
gang's forming)."""

import errno
import re
import signal
import socket
import struct
import threading
import time

import pytest

from tests.support.procs import free_port, kill, small_train_args, start, trainer_argv, wait_all, wait_for_text
from trainer import exit_codes, fencing, runtime
from trainer.errors import CoordinatorError, PeerLostError
from trainer.fencing import HELLO_BYTES, LOGGED_DROPS, PENDING_LIMIT, READ_SECONDS, attempt_of, hello

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


def connect_when_listening(port: int, timeout: float) -> socket.socket:
    """A client connection to 127.0.0.1:`port` as soon as something listens there."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def slow_loris(sock: socket.socket, stop: threading.Event) -> threading.Thread:
    """Send `sock` the start of a hello, a byte every 4 s, until `stop` (or the coordinator drops it)."""
    def drip():
        for byte in fencing.HELLO.encode() * 100:
            try:
                sock.send(bytes([byte]))
            except OSError:
                return
            if stop.wait(4):
                return

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    return thread


def test_slow_and_silent_clients_do_not_hold_the_gangs_forming(tmp_path):
    """A client that says a byte every 4 s, then 8 that say nothing, come before the real process 1: the
    gang forms and trains all the same (process 0 read one hello at a time: the slow one held the
    forming until the init timeout, exit 4, and each silent one cost 5 s)."""
    port, stop = free_port(), threading.Event()
    coordinator = launch(tmp_path, port, 0, "4", "rank0", "--init-timeout", "60")
    procs, clients = [coordinator], []
    try:
        clients.append(connect_when_listening(port, 120))
        slow_loris(clients[0], stop)
        clients += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        procs.append(launch(tmp_path, port, 1, "4", "rank1", "--init-timeout", "60"))
        assert wait_all(procs, 240) == [0, 0], "\n".join(p.output[-3000:] for p in procs)
    finally:
        stop.set()
        for client in clients:
            client.close()
        for proc in procs:
            kill(proc)
    assert "Traceback" not in coordinator.output


def open_door(monkeypatch, processes: int, timeout: float):
    """Process 0's door (fencing.gather, attempt 5) on a listener of its own, made here so that clients
    can queue before the door reads anything: (port, start, outcome, log lines)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(PENDING_LIMIT * 2)
    monkeypatch.setattr(fencing, "_listen", lambda port: listener)
    port, outcome, lines = listener.getsockname()[1], {}, []

    def door():
        try:
            outcome["left"] = fencing.gather(f"127.0.0.1:{port}", processes, "5", timeout, lines.append)
        except Exception as e:  # noqa: BLE001  the test says which
            outcome["error"] = e

    thread = threading.Thread(target=door, daemon=True)
    return port, thread, outcome, lines


def follower(port: int, process: int, timeout: float = 30):
    """A real follower's way in (as trainer/runtime.py does), in a thread: (thread, outcome)."""
    outcome = {}

    def join():
        try:
            outcome["left"] = runtime.wait_for_coordinator(
                f"127.0.0.1:{port}", timeout, lambda line: None,
                admitted=lambda sock, deadline: hello(sock, process, "5", deadline))[0]
        except Exception as e:  # noqa: BLE001
            outcome["error"] = e

    thread = threading.Thread(target=join, daemon=True)
    thread.start()
    return thread, outcome


def open_and_join(door: threading.Thread, port: int, follower_timeout: float = 30) -> tuple[dict, float]:
    """Start `door` (unless started) and a real process 1 at it; wait (bounded) for both: (process 1's
    outcome, seconds)."""
    started = time.monotonic()
    if door.ident is None:
        door.start()
    joining, joined = follower(port, 1, follower_timeout)
    door.join(60)
    joining.join(60)
    assert not door.is_alive() and not joining.is_alive()
    return joined, time.monotonic() - started


def reset(sock: socket.socket) -> None:
    """Close `sock` with a reset (RST), not an orderly end."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_hello_followed_by_a_reset_is_no_peer_and_no_traceback(monkeypatch):
    """A hello of process 1 that resets, already queued when the door reads it: process 0 wrote its
    answer to it and ended in a ConnectionResetError traceback; the client is now dropped with a line,
    and the real process 1 is admitted."""
    port, door, outcome, lines = open_door(monkeypatch, 2, 30)
    fake = socket.create_connection(("127.0.0.1", port), timeout=5)
    fake.sendall(f"{fencing.HELLO} attempt=5 process=1\n".encode())
    reset(fake)
    left = "process 1 left the coordinator before the gang formed; waiting for it again"
    door.start()
    # the real process 1 comes once the door has seen the fake one go (were its hello read first, it
    # would replace the fake one, which then leaves no line)
    deadline = time.monotonic() + 30
    while left not in lines and door.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert left in lines, (lines, outcome)
    joined, seconds = open_and_join(door, port)
    assert "error" not in outcome and joined.get("left", 0) > 0, (outcome, joined)
    assert seconds < READ_SECONDS


def test_the_timeout_names_the_process_really_missing(monkeypatch):
    """A slow client first, then process 1 of 3: the timeout blamed process 1 (never read behind the
    slow client); it names process 2 only now, and counts the connection that said no hello."""
    port, door, outcome, lines = open_door(monkeypatch, 3, 8)
    stop = threading.Event()
    loris = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        slow_loris(loris, stop)
        open_and_join(door, port, follower_timeout=20)
    finally:
        stop.set()
        loris.close()
    assert isinstance(outcome.get("error"), CoordinatorError), outcome
    assert str(outcome["error"]).endswith("process 2 never came; 1 other connection said no hello"), outcome
    assert f"the coordinator dropped a connection that said no hello within {READ_SECONDS:g} s" in lines, lines


def test_many_silent_big_or_garbage_connections_cost_the_real_peer_nothing(monkeypatch):
    """More silent connections than the door reads at a time, one that sends a hello's worth of bytes
    and no line, one of garbage: process 1, last in the queue, is admitted at once (each silent one
    cost 5 s), and the log gets a bounded number of lines."""
    port, door, outcome, lines = open_door(monkeypatch, 2, 60)
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(PENDING_LIMIT + 6)]
    try:
        clients[3].sendall(b"x" * (HELLO_BYTES + 100))
        clients[4].sendall(b"\xff\x00 garbage=1 process=\n")
        joined, seconds = open_and_join(door, port)
        assert "error" not in outcome and joined.get("left", 0) > 0, (outcome, joined)
        assert seconds < READ_SECONDS
    finally:
        for client in clients:
            client.close()
    assert len(lines) <= LOGGED_DROPS, lines
    assert "the coordinator dropped a connection that said no hello" in lines


class _OutOfDescriptors(socket.socket):
    """A listener whose every accept fails as a process out of file descriptors sees it."""

    accepts = 0

    def accept(self):
        type(self).accepts += 1
        raise OSError(errno.EMFILE, "Too many open files")


def test_a_listener_that_cannot_accept_is_one_line_and_no_busy_loop():
    """A queued connection the door cannot accept keeps the listener readable: each failure was a log
    line, as fast as the loop could go, until the deadline; now one line, and the loop backs off."""
    listener = _OutOfDescriptors(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname(), timeout=5)
    lines = []
    try:
        fencing._Door(listener, 2, "5", lines.append).admit(time.monotonic() + 1.0)
    finally:
        client.close()
        listener.close()
    assert lines == ["the coordinator could not accept a connection (Too many open files)"], lines
    assert 1 < _OutOfDescriptors.accepts <= 1.0 / fencing.ACCEPT_BACKOFF_SECONDS + 2
