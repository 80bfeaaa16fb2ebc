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
still holds. The protocol is one line each way, so the wait costs one round trip. Process 0 reads
every connection at once, each against its own deadline and size (_Door): what is not a follower of
the gang (a port check, a slow or silent client, one that resets) holds no follower up.
"""

from __future__ import annotations

import os
import selectors
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
    of `timeout`.

    Every connection is read at once, each with its own deadline (READ_SECONDS for its whole hello,
    at most HELLO_BYTES of it), so a client that is silent or slow, sends garbage or resets holds
    no real process up: it is dropped, with at most a line in the log. At most PENDING_LIMIT
    connections are read at a time; a new one beyond them takes the place of the oldest."""
    port = int(address.rpartition(":")[2])
    deadline = time.monotonic() + timeout
    door = _Door(_listen(port), num_processes, attempt, log)
    try:
        door.admit(deadline)
        if len(door.joined) < num_processes - 1:
            missing = sorted(set(range(1, num_processes)) - set(door.joined))
            others = (f"; {door.dropped} other connection{'s' * (door.dropped != 1)} said no hello"
                      if door.dropped else "")
            raise CoordinatorError(f"the {num_processes} processes did not all join the coordinator {address} within "
                                   f"the init timeout of {timeout:g} s (process 0 waited for its peers): "
                                   f"process {', '.join(map(str, missing))} never came{others}")
        door.answer()
    finally:
        door.close()
    return max(deadline - time.monotonic(), 1.0)


HELLO_BYTES = 512  # a hello is one short line
PENDING_LIMIT = 64  # connections read at a time, besides the gang's admitted ones
ACCEPT_BACKOFF_SECONDS = 0.05  # after an accept that failed (out of file descriptors)
LOGGED_DROPS = 10  # connections that said no hello, each a line; the rest are only counted
BYE_SECONDS = 1.0  # for the admitted to close their end first (the port is left free of TIME_WAIT)


class _Door:
    """Process 0's listener and the connections it reads, in one selector: a connection is pending
    (its hello not read yet, kept with its deadline and bytes so far, oldest first) or admitted
    (`joined`, by process id, watched until the answer so that one that leaves is dropped)."""

    def __init__(self, listener: socket.socket, num_processes: int, attempt: str, log):
        self.listener, self.num_processes, self.attempt, self.log = listener, num_processes, attempt, log
        self.selector = selectors.DefaultSelector()
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)
        self.pending: dict[socket.socket, list] = {}  # conn: [deadline, bytes]
        self.joined: dict[int, socket.socket] = {}
        self.dropped = 0
        self.accept_failed = False  # said once: a listener that cannot accept stays readable

    def admit(self, deadline: float) -> None:
        """Read hellos until every other process is admitted and none of them has left since, or
        until `deadline`."""
        while True:
            now = time.monotonic()
            if len(self.joined) == self.num_processes - 1:
                # Complete: a last look at the admitted only (one that reset after its hello is no peer).
                left = [key for key, _ in self.selector.select(0) if key.data is not None]
                for key in left:
                    self._watch(key.fileobj, key.data)
                if len(self.joined) == self.num_processes - 1:
                    return
                continue
            if now >= deadline:
                return
            for conn, (until, _) in list(self.pending.items()):
                if until <= now:
                    self._drop(conn, f"a connection that said no hello within {READ_SECONDS:g} s")
            wake = min([deadline, *(until for until, _ in self.pending.values())])
            for key, _ in self.selector.select(max(wake - now, 0.001)):
                if key.fileobj is self.listener:
                    self._accept(now)
                elif key.data is None:
                    if key.fileobj in self.pending:  # (not dropped as the oldest by this round's accept)
                        self._read(key.fileobj)
                else:
                    self._watch(key.fileobj, key.data)

    def answer(self) -> None:
        """Close the port, tell every admitted process so, then give each a moment to close first."""
        self.selector.unregister(self.listener)
        self.listener.close()
        for conn in self.pending:  # no hello yet, and no more time for one
            self.selector.unregister(conn)
            conn.close()
        self.pending.clear()
        for process, conn in list(self.joined.items()):
            try:
                conn.setblocking(True)
                conn.settimeout(BYE_SECONDS)
                conn.sendall(b"ok\n")
            except OSError as e:
                self.log(f"process {process} left the coordinator before it was answered ({e.strerror or e})")
                self.selector.unregister(conn)
                conn.close()
                del self.joined[process]
        until = time.monotonic() + BYE_SECONDS
        open_ = set(self.joined.values())
        while open_ and time.monotonic() < until:
            for key, _ in self.selector.select(max(until - time.monotonic(), 0.001)):
                try:
                    if key.fileobj.recv(HELLO_BYTES):
                        continue
                except OSError:
                    pass
                open_.discard(key.fileobj)
                self.selector.unregister(key.fileobj)

    def close(self) -> None:
        for conn in [*self.pending, *self.joined.values(), self.listener]:
            conn.close()
        self.selector.close()

    def _accept(self, now: float) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. out of file descriptors: the ones read now go on
                if not self.accept_failed:
                    self.log(f"the coordinator could not accept a connection ({e.strerror or e})")
                    self.accept_failed = True
                time.sleep(ACCEPT_BACKOFF_SECONDS)  # the listener stays readable: not a busy loop
                return
            if len(self.pending) >= PENDING_LIMIT:  # the oldest gives way, unless its hello is there by now
                oldest = next(iter(self.pending))
                self._read(oldest)
                if oldest in self.pending:
                    self._drop(oldest, f"a connection that said no hello before {PENDING_LIMIT} newer ones came")
            conn.setblocking(False)
            self.pending[conn] = [now + READ_SECONDS, b""]
            self.selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        entry = self.pending[conn]
        try:
            chunk = conn.recv(HELLO_BYTES - len(entry[1]))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            return self._drop(conn, f"a connection that ended before its hello ({e.strerror or e})")
        entry[1] += chunk
        if b"\n" in entry[1]:
            del self.pending[conn]
            self.selector.unregister(conn)
            return self._admit(conn, entry[1].split(b"\n", 1)[0].decode(errors="replace"))
        if not chunk:
            return self._drop(conn, "a connection that ended before its hello")
        if len(entry[1]) >= HELLO_BYTES:
            self._drop(conn, f"a connection that said no hello in {HELLO_BYTES} bytes")

    def _admit(self, conn: socket.socket, line: str) -> None:
        """Keep `conn` in `joined` when `line` is a hello of this attempt (a retried hello replaces the
        earlier); else refuse it (the process is told the coordinator's attempt)."""
        try:
            words = dict(w.split("=", 1) for w in line.removeprefix(HELLO).split() if "=" in w)
            theirs, process = words.get("attempt", ""), int(words.get("process", "-1"))
        except ValueError:
            line = ""
        if not line.startswith(HELLO):  # a port check, a scanner
            return self._drop(conn, "a connection that said no hello", registered=False)
        if theirs != self.attempt:
            reason = f"process {process} of attempt {theirs or '(none)'}, this is attempt {self.attempt or '(none)'}"
        elif not 0 < process < self.num_processes:
            reason = f"process id {process} is out of range"
        else:
            if process in self.joined:  # the same process again (it gave up waiting and retried): the new one counts
                self._leave(process)
            self.joined[process] = conn
            self.selector.register(conn, selectors.EVENT_READ, process)
            return None
        try:
            conn.send(f"refused attempt={self.attempt}\n".encode())  # a short line: the buffer takes it whole
        except OSError:
            pass
        self.log(f"refused a process at the coordinator: {reason}")
        conn.close()

    def _watch(self, conn: socket.socket, process: int) -> None:
        """An admitted process's connection says something before its answer: it has closed (it gave
        up waiting, or was no real process), or it sends more, which is ignored."""
        try:
            if conn.recv(HELLO_BYTES):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        if self.joined.get(process) is conn:
            self.log(f"process {process} left the coordinator before the gang formed; waiting for it again")
            self._leave(process)

    def _leave(self, process: int) -> None:
        conn = self.joined.pop(process)
        self.selector.unregister(conn)
        conn.close()

    def _drop(self, conn: socket.socket, reason: str, registered: bool = True) -> None:
        if registered:
            del self.pending[conn]
            self.selector.unregister(conn)
        conn.close()
        self.dropped += 1
        if self.dropped <= LOGGED_DROPS:
            more = " (further ones are not logged)" if self.dropped == LOGGED_DROPS else ""
            self.log(f"the coordinator dropped {reason}{more}")


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
