"""A process restarted in place after its gang had met waits for its peers without the init timeout.

An Indexed Job's container restarts in place, in the pod it had, when its process stopped or saw a
peer die (docs/kubernetes.md). Its gang had met, so the job's configuration is proven: what the new
process waits for is a lost peer's replacement. After a node loss that replacement waits for the node's
repair or a person's action, often for longer than the init timeout, and ending there (the coordinator
code, which counts) would fail the Job while it waits. So the render gives the pod's UID (POD_UID_ENV),
the process leaves a mark named after it in the temporary directory once its gang has met (the
render's /tmp is an emptyDir: the pod keeps it across its container's restarts, a new pod starts
without it), and a process that finds the mark waits for its peers up to REJOIN_WAIT_SECONDS.
Without the variable (every other target, `jaxgen run --local`, SLURM) nothing changes.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from trainer.errors import ConfigError

POD_UID_ENV = "JAX_TRAINING_POD_UID"  # the pod's metadata.uid, where its container restarts in place
REJOIN_WAIT_SECONDS = 7 * 24 * 3600  # a bound only so that every wait stays finite
_UID = re.compile(r"[0-9A-Za-z-]{1,64}")


def mark(env=os.environ) -> Path | None:
    """The mark of this pod's gang having met (None without POD_UID_ENV); ConfigError for a value
    that is no UID (it names a file)."""
    uid = env.get(POD_UID_ENV, "").strip()
    if not uid:
        return None
    if not _UID.fullmatch(uid):
        raise ConfigError(f"{POD_UID_ENV}={uid[:40]!r} must be a pod's UID (letters, digits and '-')")
    return Path(tempfile.gettempdir()) / f"jax-training-met-{uid}"


def has_met(marked: Path | None) -> bool:
    """Whether a process of this pod already met its gang: this one restarted in place."""
    return marked is not None and marked.exists()


def record_met(marked: Path | None) -> None:
    """Leave the mark (no mark where the directory cannot take it: the next restart waits as a first start)."""
    if marked is not None:
        try:
            marked.touch()
        except OSError:
            pass
