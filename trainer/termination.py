"""The pod's termination message: what `kubectl get pod` and `kubectl describe` show of how the
process ended (its result line, or its error). Standard library only: the error path imports it."""

from __future__ import annotations

import os
import sys

# Kubernetes' default terminationMessagePath; outside a pod it does not exist and nothing is written.
TERMINATION_LOG = "/dev/termination-log"
# How an error's message starts (what `jaxgen status` shows of a failed pod): `error (exit 2): ...`.
ERROR_MARK = "error (exit "


def error_message(code: int, error: object) -> str:
    return f"{ERROR_MARK}{code}): {error}"


def error_of_message(message: str) -> str | None:
    """The error line of a termination message, or None when it holds none (a result)."""
    lines = message.strip().splitlines()
    return lines[-1] if lines and lines[-1].startswith(ERROR_MARK) else None


def terminate_with(message: str, path: str = TERMINATION_LOG) -> None:
    """Leave `message` in the pod's termination message (at most 4096 bytes are kept); a no-op
    outside a pod."""
    if not os.path.exists(path):
        return
    try:
        with open(path, "w") as f:
            f.write(message[:4000])
    except OSError as e:
        print(f"cannot write the termination message to {path}: {e.strerror}", file=sys.stderr)
