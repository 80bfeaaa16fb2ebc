"""A program of your own on any target: one call brings up distributed JAX, then an all-reduce.

    python trainer/examples/allreduce.py   (the trainer package importable: installed or on PYTHONPATH)

Every device contributes its process id to a psum over all devices of all processes, which must
equal sum(p * local devices for p in processes). Prints one line per process and exits 0.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from trainer.distributed import initialize

proc = initialize()  # the cluster from the environment; exits with one clear line if it is wrong
mesh = jax.make_mesh((proc.device_count,), ("all",))
n_local = len(proc.local_devices)
ids = jax.make_array_from_process_local_data(NamedSharding(mesh, P("all")), np.full(n_local, proc.process_id, np.int32))
psum = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "all"), mesh=mesh, in_specs=P("all"), out_specs=P()))
total = int(jax.block_until_ready(psum(ids))[0])  # block: several local CPU devices deadlock otherwise
expected = n_local * sum(range(proc.num_processes))
print(f"process {proc.process_id}/{proc.num_processes}: {n_local} local of {proc.device_count} devices, "
      f"psum of process ids = {total} (expected {expected})", flush=True)
if proc.num_processes > 1:
    jax.distributed.shutdown()
raise SystemExit(0 if total == expected else 1)
