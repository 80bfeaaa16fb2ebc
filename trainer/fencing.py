"""Attempt fencing: a process of an older attempt of the job can never join, or stall, a newer one.

Each gang has an attempt identity that its launcher gives (ATTEMPT_SOURCES, the first one set). Before
JAX's coordination service starts, process 0 listens on the coordinator's port itself and every other
process says hello there with its attempt and process id and waits for the answer. Process 0
refuses a hello of another attempt, and once all of its gang have said hello, it answers them, closes
the port and starts JAX's service on it. So:

- a process of another attempt is refused before it can register with JAX (its registration would
  replace the real process's and fail the whole gang); when its attempt is the older one it ends
  with one line that says so, otherwise it keeps waiting: the coordinator may be the stale one;
- a process that comes once the gang has formed finds JAX's service, which does not answer a
  hello: it keeps trying, and ends at its init timeout, never having joined.

Without an attempt identity (an Indexed Job's pods, which are replaced one by one) the second rule
still holds. The protocol is one line each way, so the wait costs one round trip.
"""

from __future__ import annotations

import os
import socket
import time

from trainer.errors import CoordinatorError, PeerLostError
from trainer.integers import count_less, is_count

# Where a process finds its attempt, in order: the launcher's own variable (jaxgen run --local sets it),
# SLURM's requeue count.
ATTEMPT_ENV = "JAX_TRAINING_ATTEMPT"
ATTEMPT_SOURCES = (ATTEMPT_ENV, "SLURM_RESTART_COUNT")
HELLO = "jax-training hello"
READ_SECONDS = 5.0


def attempt_of(env=os.environ) -> str:
    """This gang's attempt identity ("" when the launcher gives none). SLURM sets its requeue count
    from the first requeue on: a SLURM job's first start is attempt 0, so that a process left over
    from it is told that it is the older one."""
    found = next((env[name].strip() for name in ATTEMPT_SOURCES if env.get(name, "").strip()), "")
    return found or ("0" if env.get("SLURM_JOB_ID", "").strip() else "")


def _is_older(mine: str, theirs: str) -> bool:
    """Whether attempt `mine` is known to come before `theirs` (counts compare; other ids cannot).
    A count is ASCII digits (str.isdigit() also takes '²'), of any length."""
    return is_count(mine) and is_count(theirs) and count_less(mine, theirs)


def _read_line(sock: socket.socket, deadline: float, wait: float = READ_SECONDS) -> str:
    """One line, waiting at most `wait` seconds for each part of it and never past `deadline`."""
    data = b""
    while b"\n" not in data and len(data) < 512:
        sock.settimeout(max(min(wait, deadline - time.monotonic()), 0.001))
        chunk = sock.recv(512)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")


def hello(sock: socket.socket, process_id: int, attempt: str, deadline: float) -> bool:
    """A follower's hello on a connected socket: True when the coordinator admitted it, False when
    the answer was no coordinator's of this job (JAX's service of a gang already formed, nothing);
    raises PeerLostError when this process's attempt is older than the coordinator's."""
    try:
        sock.sendall(f"{HELLO} attempt={attempt} process={process_id}\n".encode())
        answer = _read_line(sock, deadline, wait=deadline)  # the answer comes once the whole gang is there
    except OSError:
        return False
    if answer == "ok":
        return True
    if answer.startswith("refused attempt="):
        theirs = answer.split("=", 1)[1]
        if _is_older(attempt, theirs):
            raise PeerLostError(f"this process belongs to attempt {attempt} of the job, the coordinator runs the "
                                f"newer attempt {theirs}: a process of an older attempt cannot join it")
    return False


def gather(address: str, num_processes: int, attempt: str, timeout: float, log) -> float:
    """Process 0: admit one hello per other process of this attempt on the port of `address` (HOST:PORT),
    then answer them all and close the port (JAX's service takes it next). Returns the seconds left
    of `timeout`."""
    port = int(address.rpartition(":")[2])
    deadline = time.monotonic() + timeout
    listener = _listen(port)
    joined: dict[int, socket.socket] = {}
    try:
        while len(joined) < num_processes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, num_processes)) - set(joined))
                raise CoordinatorError(f"the {num_processes} processes did not all join the coordinator {address} within "
                                       f"the init timeout of {timeout:g} s (process 0 waited for its peers): "
                                       f"process {', '.join(map(str, missing))} never came")
            listener.settimeout(min(left, 1.0))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            refusal = _admit(conn, joined, num_processes, attempt, deadline)
            if refusal:
                log(f"refused a process at the coordinator: {refusal}")
                conn.close()
        listener.close()
        for conn in joined.values():
            conn.sendall(b"ok\n")
        for conn in joined.values():  # the follower closes first: the port is left free of TIME_WAIT
            try:
                _read_line(conn, time.monotonic() + 1.0)
            except OSError:
                pass
    finally:
        listener.close()
        for conn in joined.values():
            conn.close()
    return max(deadline - time.monotonic(), 1.0)


def _admit(conn: socket.socket, joined: dict, num_processes: int, attempt: str, deadline: float) -> str | None:
    """Keep `conn` in `joined` when it is a hello of this attempt (a retried hello replaces the earlier); else
    the reason it is refused (the process is told the coordinator's attempt)."""
    try:
        line = _read_line(conn, deadline)
        words = dict(w.split("=", 1) for w in line.removeprefix(HELLO).split() if "=" in w)
        theirs, process = words.get("attempt", ""), int(words.get("process", "-1"))
    except (OSError, ValueError):
        line = ""
    if not line.startswith(HELLO):  # a port check, a scanner
        return "a connection that said no hello"
    if theirs != attempt:
        reason = f"process {process} of attempt {theirs or '(none)'}, this is attempt {attempt or '(none)'}"
    elif not 0 < process < num_processes:
        reason = f"process id {process} is out of range"
    else:
        if process in joined:  # the same process again (it gave up waiting and retried): the new one counts
            joined.pop(process).close()
        joined[process] = conn
        return None
    try:
        conn.sendall(f"refused attempt={attempt}\n".encode())
    except OSError:
        pass
    return reason


def _listen(port: int) -> socket.socket:
    """A listening socket on every address of this host (as JAX's service binds, [::]:port; IPv4's
    0.0.0.0 where IPv6 is off)."""
    error = None
    for family, address in ((socket.AF_INET6, ("::", port)), (socket.AF_INET, ("0.0.0.0", port))):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            error = e
            continue
        try:
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(64)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise CoordinatorError(f"the coordinator cannot listen on port {port}: {error.strerror or error}")
