"""`query` and `allreduce`: report devices per process; check a global psum of ones."""

from __future__ import annotations

import numpy as np

from trainer.cluster import ClusterSpec
from trainer.errors import DeviceCountError
from trainer.metrics import Logger


def query(spec: ClusterSpec, platform: str, init_timeout: float, heartbeat_timeout: int, allreduce: bool) -> int:
    log = Logger(spec.process_id)
    log(f"cluster: {spec.describe()}")
    from trainer import runtime

    jax = runtime.initialize(spec, platform, init_timeout, heartbeat_timeout, log)
    local, total = jax.local_devices(), jax.device_count()
    log(f"process {jax.process_index()}/{jax.process_count()}: local devices {len(local)} "
        f"{[str(d) for d in local]}, global devices {total}")
    if allreduce:
        ones = np.ones((len(local),), np.float32)
        result = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(ones)
        values = [float(v) for v in np.asarray(jax.block_until_ready(result))]
        log(f"psum of ones = {values[0]:g} (expected {total})")
        if any(v != total for v in values):
            raise DeviceCountError(f"psum of ones gave {values}, expected {total} on every local device")
    if spec.distributed:
        jax.distributed.shutdown()
    return 0
