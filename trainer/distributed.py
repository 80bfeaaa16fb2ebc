"""Distributed JAX for your own program, brought up exactly as the trainer brings itself up.

    from trainer.distributed import initialize

    proc = initialize()  # before any other JAX call
    print(proc.process_id, proc.num_processes, proc.local_devices)

One call resolves where this process sits in the job from keyword arguments, else the variables any
of our targets set (JAX_*; Kubeflow JAXJob and TrainJob; an Indexed Job's JOB_COMPLETION_INDEX and
headless-Service host names; SLURM: see trainer/cluster.py), waits for the coordinator, runs
`jax.distributed.initialize` with every value explicit, and checks the local and global device
counts. A bad setting, a coordinator or peer that never comes, or a device count that differs from
the expected one ends the process with one line, ``Rank <i>: error: ...``, and the exit code of
trainer/exit_codes.py that every target's failure policy reads (exit_on_error=False raises the
TrainerError instead).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from trainer import runtime
from trainer.cluster import ClusterSpec, resolve_cluster
from trainer.errors import TrainerError, report
from trainer.metrics import Logger

# JAX_PLATFORMS (JAX's own variable) -> the trainer's platform; anything else is left to JAX.
_PLATFORMS = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu"}


@dataclass(frozen=True)
class Process:
    """This process's place in the job, once JAX is up."""

    process_id: int
    num_processes: int
    local_devices: tuple  # jax.Device objects of this process
    device_count: int  # global
    coordinator_address: str | None
    spec: ClusterSpec  # what was resolved, with the source of each value

    @property
    def is_coordinator(self) -> bool:
        return self.process_id == 0


def initialize(*, coordinator_address: str | None = None, coordinator_port: int | None = None,
               num_processes: int | None = None, process_id: int | None = None,
               local_device_count: int | None = None, platform: str | None = None,
               init_timeout: float = runtime.DEFAULT_INIT_TIMEOUT,
               heartbeat_timeout: int = runtime.DEFAULT_HEARTBEAT_TIMEOUT,
               exit_on_error: bool = True) -> Process:
    """Bring up distributed JAX for this process (see the module doc). Arguments left None come
    from the environment; `platform` is "cpu" or "gpu" (default: from JAX_PLATFORMS, else JAX's
    choice); `local_device_count` (default: JAX_LOCAL_DEVICE_COUNT) is both the expected number of
    devices per process and, on CPU, how many devices JAX creates."""
    spec = None
    try:
        spec = resolve_cluster(os.environ, coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, local_device_count=local_device_count,
                               coordinator_port=coordinator_port)
        if platform is None:
            platform = _PLATFORMS.get(os.environ.get("JAX_PLATFORMS", "").strip().lower())
        jax = runtime.initialize(spec, platform, init_timeout, heartbeat_timeout, Logger(spec.process_id))
    except TrainerError as e:
        if not exit_on_error:
            raise
        sys.exit(report(e, spec))
    return Process(spec.process_id, spec.num_processes, tuple(jax.local_devices()), jax.device_count(),
                   spec.coordinator_address, spec)
