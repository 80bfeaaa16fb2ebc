"""Errors the trainer reports as one clear line and a distinct exit code (no traceback).
The codes and what each target's failure policy does with them: trainer/exit_codes.py."""

import os
import sys

from trainer import exit_codes


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


def as_peer_lost(error: BaseException) -> PeerLostError | None:
    """The PeerLostError a failed collective of a distributed run means, or None for any other error:
    a step raises JaxRuntimeError, multihost_utils' process_allgather a ValueError from gloo."""
    text = str(error).strip()
    if type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError") or (isinstance(error, ValueError)
                                                                          and "Gloo" in text):
        first = text.splitlines()[0] if text else type(error).__name__
        return PeerLostError(f"a collective failed, a peer process died or became unreachable: {first[:300]}")
    return None


def report(error: TrainerError, spec=None, distributed: bool = True) -> int:
    """Print `error` as one line, ``Rank <i>: error: ...`` (``error: ...`` for a command that is not
    distributed), on stderr and return its exit code; once jax is loaded, exit with it at once
    instead: JAX's exit handlers would wait in its distributed shutdown for peers that are gone.
    `spec`: the ClusterSpec, when it was resolved."""
    rank = spec.process_id if spec is not None else os.environ.get("JAX_PROCESS_ID") or "?"
    print(f"Rank {rank}: error: {error}" if distributed else f"error: {error}", file=sys.stderr, flush=True)
    from trainer.results import terminate_with

    terminate_with(f"error (exit {error.exit_code}): {error}")
    if "jax" in sys.modules:
        from trainer.preemption import flush_and_exit

        flush_and_exit(error.exit_code)
    return error.exit_code
