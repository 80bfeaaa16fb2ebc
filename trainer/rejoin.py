"""A process restarted in place after its gang had met waits for its peers without the init timeout.

An Indexed Job's container restarts in place, in the pod it had, when its process stopped or saw a
peer die (docs/kubernetes.md). Its gang had met, so the job's configuration is proven: what the new
process waits for is a lost peer's replacement. After a node loss that replacement waits for the node's
repair or a person's action, often for longer than the init timeout, and ending there (the coordinator
code, which counts) would fail the Job while it waits. So the render gives the pod's UID (POD_UID_ENV),
the process leaves a mark named after it in the temporary directory once its gang has met (the
render's /tmp is an emptyDir: the pod keeps it across its container's restarts, a new pod starts
without it), and a process that finds the mark waits for its peers up to REJOIN_WAIT_SECONDS, in
rounds of the init timeout (trainer/runtime.py). The cost: a gang that cannot form again for another
reason (a pod network cut while its kubelet stays up) waits that long too, a line every round, where
it used to end at the init timeout. Without the variable (every other target, `jaxgen run --local`,
SLURM) nothing changes.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from trainer.errors import ConfigError

POD_UID_ENV = "JAX_TRAINING_POD_UID"  # the pod's metadata.uid, where its container restarts in place
REJOIN_WAIT_SECONDS = 7 * 24 * 3600  # a bound only so that every wait stays finite
SLOW_RETRY_SECONDS = 5.0  # a follower's tries of the coordinator after the first round
_UID = re.compile(r"[0-9A-Za-z-]{1,64}")


def mark(env=os.environ) -> Path | None:
    """The mark of this pod's gang having met (None without POD_UID_ENV); ConfigError for a value
    that is no UID (it names a file)."""
    uid = env.get(POD_UID_ENV, "").strip()
    if not uid:
        return None
    if not _UID.fullmatch(uid):
        raise ConfigError(f"{POD_UID_ENV}={uid[:40]!r} must be a pod's UID (letters, digits and '-')")
    try:
        directory = tempfile.gettempdir()
    except OSError:  # no writable temporary directory: no mark, every start waits as a first one
        return None
    return Path(directory) / f"jax-training-met-{uid}"


def has_met(marked: Path | None) -> bool:
    """Whether a process of this pod already met its gang: this one restarted in place."""
    return marked is not None and marked.exists()


def record_met(marked: Path | None, log) -> None:
    """Leave the mark (where the directory cannot take it, a line: the next restart waits as a first start)."""
    if marked is not None:
        try:
            marked.touch()
        except OSError as error:
            log(f"warning: cannot leave the mark {marked} ({error.strerror or error}): a restart in place "
                "will wait for its peers only the init timeout")
