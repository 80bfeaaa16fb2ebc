"""The trainer's exit codes: the one table every target's failure policy is rendered from.

Pure Python (no jax): the generator imports it, and charts/jax-training/files/exit-codes.json is
generated from it (`make generate`; a test checks the copy). Each code has an action:

- fail:   permanent; retrying cannot help (Indexed Job / JobSet child Job: FailJob at once)
- retry:  worth a retry from the last checkpoint; counts against the backoff limit
- ignore: retried without counting against the backoff limit, as a pod disruption is: the process
          was stopped from outside and saved its work (preempted: a pod deletion or preemption
          carries no DisruptionTarget condition), or it only saw a peer die (peer-lost: the
          failure is counted once, on the pod that died)

Retryable codes of our own are >= 128 (141, 142, 143) because the Kubeflow training-operator's
ExitCode restart policy (JAXJob) retries exactly the codes 128-255 and fails on 1-127.
"""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ExitCode:
    name: str
    code: int
    action: str  # fail | retry | ignore
    meaning: str


TABLE = (
    ExitCode("unexpected", 1, "retry", "an unexpected error (a Python traceback)"),
    ExitCode("config", 2, "fail", "bad flags or environment (the line names the flag or variable)"),
    ExitCode("data", 3, "fail", "a dataset file is missing, truncated or corrupt, or cannot be downloaded"),
    ExitCode("coordinator", 4, "retry", "the coordinator or a peer did not join within the init timeout"),
    ExitCode("device-count", 5, "fail", "the devices found differ from hosts_count x local_device_count"),
    ExitCode("checkpoint", 6, "fail", "the outputs directory belongs to another configuration, or a checkpoint, "
                                      "metrics or model file cannot be written or read (full, read-only, foreign)"),
    ExitCode("peer-lost", 141, "ignore", "a peer process died mid-run (a collective or the coordinator failed)"),
    ExitCode("hang", 142, "retry", "no training step completed within the hang timeout (stacks dumped)"),
    ExitCode("preempted", 143, "ignore", "SIGTERM/SIGUSR1: every process checkpointed the same step and stopped"),
)
BY_NAME = {entry.name: entry for entry in TABLE}

CONFIG = BY_NAME["config"].code
DATA = BY_NAME["data"].code
COORDINATOR = BY_NAME["coordinator"].code
DEVICE_COUNT = BY_NAME["device-count"].code
CHECKPOINT = BY_NAME["checkpoint"].code
PEER_LOST = BY_NAME["peer-lost"].code
HANG = BY_NAME["hang"].code
PREEMPTED = BY_NAME["preempted"].code
# Ctrl-C (SIGINT) on an interactive run: it checkpoints and stops as on SIGTERM, and exits as an
# interrupted command does. Outside the table: no engine sends it to a pod or task.
INTERRUPTED = 130


def codes(action: str) -> list[int]:
    return [entry.code for entry in TABLE if entry.action == action]


def action_of(code: int) -> str:
    """What a failure policy does with an exit code; codes outside the table (a signal, an OOM
    kill) are retried."""
    return next((entry.action for entry in TABLE if entry.code == code), "retry")


def describe(code: int) -> str:
    """`exit code 6: <what it means>` for a code of the table; for another code above 128, the
    signal a shell or a container runtime reports with it (137: SIGKILL, an OOM kill)."""
    entry = next((e for e in TABLE if e.code == code), None)
    if entry:
        return f"exit code {code}: {entry.meaning}"
    if code > 128:
        try:
            return f"exit code {code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def describe_exit(returncode: int) -> str:
    """A process's end in words from its return code as subprocess gives it (-N: killed by signal N):
    the signal that killed it, or what its exit code means."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return describe(returncode)


def as_json() -> str:
    """The table as charts/jax-training/files/exit-codes.json holds it."""
    return json.dumps({"exit_codes": [asdict(entry) for entry in TABLE]}, indent=2) + "\n"

