"""The pod's termination message: what `kubectl get pod` and `kubectl describe` show of how the
process ended (its result line, or its error). Standard library only: the error path imports it."""

from __future__ import annotations

import os
import sys

# Kubernetes' default terminationMessagePath; outside a pod it does not exist and nothing is written.
TERMINATION_LOG = "/dev/termination-log"


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
