"""A distributed command runs in a child process, so that a coordination failure ends with the
peer-lost exit code even when JAX aborts the process.

JAX's coordination client ends the process with a C++ fatal error (SIGABRT, no Python code runs) when
its heartbeats fail or the coordination service reports a failed task: a stopped or restarted
coordinator, a peer that stopped sending heartbeats. Its hook for that moment (the client's
missed_heartbeat_callback) cannot take a Python function in jaxlib 0.10: passing the status to it
ends the process with std::bad_cast. So the parent passes the child's stderr on as it comes, keeps
its tail, and when the child dies by a signal after JAX's fatal line, classifies that line
(trainer/errors.PEER_LOST_SIGNS), prints one line and exits with the peer-lost code. Stop signals are
passed to the child; the child dies with the parent. Any other death by a signal is reported as a
shell does (128 + the signal).

Where the job's controller restarts the whole gang on the first failed pod it sees (a JobSet: its
failure policy matches that pod's code), a process that only saw its peer die waits a few seconds
before it exits with the peer-lost code (PEER_LOST_WAIT_ENV, which those renders set), so that the
pod that died is the one seen: a crash counts against the restart limit, a disruption does not. A
stop signal ends the wait (the controller is already deleting the pod).

The child is a fork of the parent, taken before jax is imported (no thread runs yet): it starts with
the interpreter and the trainer's modules the parent already loaded, where a new `python -m trainer`
loaded them again on the path to the first step of every (re)start."""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
from typing import Callable

from trainer import exit_codes
from trainer.errors import JAX_FATAL_MARK, ConfigError, PeerLostError, first_line, peer_lost_cause, report
from trainer.goodput import LAUNCHED_ENV, launched

SUPERVISED_ENV = "JAX_TRAINING_SUPERVISED"  # set in the child: it runs the command itself
PEER_LOST_WAIT_ENV = "JAX_TRAINING_PEER_LOST_WAIT"  # seconds to wait before exiting on a lost peer
PEER_LOST_WAIT_MAX = 3600
FORWARDED = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP)
TAIL_BYTES = 16 * 1024
_PR_SET_PDEATHSIG = 1


def supervised() -> bool:
    return os.environ.get(SUPERVISED_ENV) == "1"


def _find_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: a child outlives a SIGKILLed parent
        return None


# Looked up here, in the parent: loading a library between fork and exec in a process with threads
# (jaxgen's output readers) may wait forever on a lock another thread held at the fork.
_PRCTL = _find_prctl()


def die_with_parent(parent: int | None = None) -> None:
    """In a child, between fork and exec (preexec_fn): the kernel SIGKILLs it when the thread that
    started it ends (its parent's main thread: the parent's death). `parent`, the parent's pid taken
    before the fork: a parent that died before this ran is seen as a new parent pid, and the child
    ends at once."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _leave_distributed() -> None:
    jax = sys.modules.get("jax")
    if jax is None:
        return
    try:
        jax.distributed.shutdown()  # a no-op where it ran or never started
    except Exception as e:  # noqa: BLE001  a peer gone already: the process ends all the same
        print(f"leaving JAX's distributed service: {first_line(e)}", file=sys.stderr)


def peer_lost_wait(env=os.environ) -> float:
    """PEER_LOST_WAIT_ENV's seconds (0 where unset); ConfigError for another value."""
    text = env.get(PEER_LOST_WAIT_ENV, "").strip()
    try:
        seconds = float(text or 0)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= PEER_LOST_WAIT_MAX:  # (nan and inf too)
        raise ConfigError(f"{PEER_LOST_WAIT_ENV}={text[:40]!r} must be seconds from 0 to {PEER_LOST_WAIT_MAX}")
    return seconds


def _wait_for_stop(seconds: float, rank: int) -> None:
    """Wait `seconds`, or until a stop signal comes."""
    if seconds <= 0:
        return
    print(f"Rank {rank}: waiting {seconds:g} s before exiting, so that the job's controller sees the failed "
          f"peer's pod first", file=sys.stderr, flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # taken by sigtimedwait, not by a handler
    signal.sigtimedwait(FORWARDED, seconds)


def run(spec, command: Callable[[], int]) -> int:
    """Run `command` (the trainer's command, supervised) in a child and return its exit code, or the
    peer-lost code when JAX aborted it on a coordination failure, after PEER_LOST_WAIT_ENV's wait.
    The child ends with `command`'s code as soon as it returns."""
    wait = peer_lost_wait()  # (a bad value is reported now, not at the end)
    code = _supervise(spec, command)
    if code == exit_codes.PEER_LOST:
        _wait_for_stop(wait, spec.process_id)
    return code


def _supervise(spec, command: Callable[[], int]) -> int:
    started = str(launched())
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its stderr goes to the parent, it dies with it, and runs the command
        os.close(read_end)
        os.dup2(write_end, 2)
        os.close(write_end)
        die_with_parent(parent)
        os.environ.update({SUPERVISED_ENV: "1", LAUNCHED_ENV: started})
        code = command()
        # Its work is done and on disk (checkpoints, records, results): it leaves JAX's distributed
        # service (the step of JAX's own exit that its peers wait for; done already after training)
        # and ends without the rest of the interpreter's teardown, 0.3 s of JAX's clean-up between a
        # stop's save and the pod's end, which its controller waits for before the restart.
        from trainer.preemption import flush_and_exit  # (numpy's: loaded by the command, never by jaxgen)

        _leave_distributed()
        flush_and_exit(code)
    os.close(write_end)

    reaped = []

    def forward(number, frame):
        if reaped:  # its pid may be another process's by now
            return
        try:
            os.kill(pid, number)
        except ProcessLookupError:  # the child has ended: its end is read below
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    tail = b""
    while chunk := os.read(read_end, 65536):
        try:
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()
        except OSError:  # nobody reads our stderr any more: the child's is still drained
            pass
        tail = (tail + chunk)[-TAIL_BYTES:]
    os.close(read_end)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    reaped.append(pid)
    if code >= 0:
        return code
    text = tail.decode(errors="replace")
    mark = text.rfind(JAX_FATAL_MARK)
    cause = peer_lost_cause(text[mark:]) if mark >= 0 else None
    if cause is None:
        return 128 - code  # a signal, as a shell reports it
    status = text[mark:].partition("absl::Status:")[2].strip().splitlines()
    return report(PeerLostError(f"{cause}: {(status[0] if status else 'JAX aborted')[:300]}"), spec)
