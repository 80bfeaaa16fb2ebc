"""Errors the trainer reports as one clear line and a distinct exit code (no traceback).
The codes and what each target's failure policy does with them: trainer/exit_codes.py."""

import errno
import os
import re
import sys

from trainer import exit_codes
from trainer.termination import error_message, terminate_with


class TrainerError(Exception):
    """Base class: `exit_code` is the process exit status."""

    exit_code = 1


class ConfigError(TrainerError):
    """Bad flags or environment (names the flag or variable)."""

    exit_code = exit_codes.CONFIG


class DataError(TrainerError):
    """A dataset file is missing, truncated, corrupt or cannot be downloaded (names the file)."""

    exit_code = exit_codes.DATA


class CoordinatorError(TrainerError):
    """The coordinator did not come up, or the peers did not all join, within the init timeout."""

    exit_code = exit_codes.COORDINATOR


class DeviceCountError(TrainerError):
    """The global device count is not hosts x local devices, or an all-reduce gave a wrong sum."""

    exit_code = exit_codes.DEVICE_COUNT


class CheckpointError(TrainerError):
    """A checkpoint exists but does not belong to this configuration."""

    exit_code = exit_codes.CHECKPOINT


class PeerLostError(TrainerError):
    """A collective or the coordination service failed mid-run: a peer process died."""

    exit_code = exit_codes.PEER_LOST


class OutputError(TrainerError):
    """Standard output cannot take the text (a full disk, a device error)."""


# What a write to standard output fails with when it cannot take the text: a full disk or quota, a
# device error. A closed pipe (`… | head`) is none of them: its reader has what it wanted.
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)


def printable(text: str) -> str:
    """`text` as a terminal can show it: each character that is not printable (a control character such
    as ESC or a newline, a bidirectional override, Python's stand-in for a byte of a name that is not
    UTF-8) spelled as its escape (\\x1b, \\n, \\u202e, \\udcff); a name a job or its bucket chose is
    printed through it, so it can neither move the cursor nor recolour the screen."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _discard_stdout() -> None:
    """The rest of standard output goes nowhere: what is still buffered would fail again, at exit too."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def unwritable_stdout(error: OSError) -> str | None:
    """The one line that says `error`, raised by a write to standard output, where it means that
    standard output cannot take the text (then the rest of the output goes nowhere); None for another error."""
    if error.errno not in WRITE_ERRORS:
        return None
    _discard_stdout()
    return f"cannot write to standard output: {error.strerror or error}"


def write_stdout(text: str) -> None:
    """Write `text` to standard output at once. After a closed pipe the rest goes nowhere and the
    command goes on; where standard output cannot take the text, the process ends here with one line
    and OutputError's exit code, from any thread (a log line may come from a background one)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
    except OSError as error:
        if (message := unwritable_stdout(error)) is None:
            raise
        from trainer.preemption import flush_and_exit

        flush_and_exit(report(OutputError(message), distributed=False))


# The line JAX's coordination client writes before it aborts the process.
JAX_FATAL_MARK = "JAX distributed service detected fatal errors"
# How a coordination or collective failure shows, in a Python exception's text (a step's
# JaxRuntimeError, multihost_utils' ValueError from gloo) or in JAX's fatal log line (its coordination
# client aborts the process, see trainer/supervisor.py), and what it means. Every one ends the process
# with the peer-lost code; the first pattern that matches names the cause.
PEER_LOST_SIGNS = (
    (r"stopped sending heartbeats", "a peer stopped sending heartbeats to the coordinator (it died, was stopped "
                                    "or was cut off)"),
    (r"CoordinationService/Heartbeat", "the coordinator stopped answering heartbeats (it died, was stopped "
                                       "or restarted)"),
    (r"Failed to send RPC to coordination service", "the coordinator became unreachable (it died, was stopped "
                                                    "or restarted)"),
    (r"[Ii]ncarnation|not (been )?registered", "the coordinator restarted and no longer knows this process"),
    (r"\bGloo\b.*([Cc]onnect timeout|Connection refused)", "a collective could not connect to a peer"),
    (r"\bGloo\b.*([Tt]imed out|[Tt]imeout)", "a collective timed out waiting for a peer"),
    (r"\bGloo\b", "a collective failed, a peer process died or became unreachable"),
    (r"DEADLINE_EXCEEDED", "a call to the coordinator timed out"),
    (r"UNAVAILABLE", "the coordinator or a peer became unreachable"),
    (re.escape(JAX_FATAL_MARK), "the coordination service reported a failure"),
)


def peer_lost_cause(text: str) -> str | None:
    """The cause PEER_LOST_SIGNS names for `text`, or None when it is no coordination failure."""
    return next((cause for pattern, cause in PEER_LOST_SIGNS if re.search(pattern, text)), None)


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of `error`'s message, at most `limit` characters; its type's name when it has none."""
    text = str(error).strip()
    return text.splitlines()[0][:limit] if text else type(error).__name__


def as_peer_lost(error: BaseException) -> PeerLostError | None:
    """The PeerLostError a failed collective or coordination call of a distributed run means, or None
    for any other error (an out-of-memory error, a bug)."""
    text = str(error).strip()
    if not (type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError") or isinstance(error, ValueError)):
        return None
    cause = peer_lost_cause(text)
    if cause is None:
        return None
    return PeerLostError(f"{cause}: {first_line(error)}")


def report(error: TrainerError, spec=None, distributed: bool = True) -> int:
    """Print `error` as one line, ``Rank <i>: error: ...`` (``error: ...`` for a command that is not
    distributed), on stderr and return its exit code; once jax is loaded, exit with it at once
    instead: JAX's exit handlers would wait in its distributed shutdown for peers that are gone.
    `spec`: the ClusterSpec, when it was resolved."""
    rank = spec.process_id if spec is not None else os.environ.get("JAX_PROCESS_ID") or "?"
    print(f"Rank {rank}: error: {error}" if distributed else f"error: {error}", file=sys.stderr, flush=True)
    terminate_with(error_message(error.exit_code, error))
    if "jax" in sys.modules:
        from trainer.preemption import flush_and_exit

        flush_and_exit(error.exit_code)
    return error.exit_code
