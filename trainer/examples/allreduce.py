"""A program of your own on any target: one call brings up distributed JAX, then an all-reduce.

    python trainer/examples/allreduce.py   (the trainer package importable: installed or on PYTHONPATH)

Every device contributes its process id; the psum over all devices of all processes must equal
sum(p * local devices for p in processes). Prints one line per process and exits 0.
"""

import jax
import jax.numpy as jnp

from trainer.distributed import initialize

proc = initialize()  # the cluster from the environment; exits with one clear line if it is wrong
n_local = len(proc.local_devices)
ids = jnp.full((n_local,), proc.process_id, jnp.int32)
total = jax.pmap(lambda x: jax.lax.psum(x, "all"), axis_name="all")(ids)
total = int(jax.block_until_ready(total)[0])  # block: several local CPU devices deadlock otherwise
expected = n_local * sum(range(proc.num_processes))
print(f"process {proc.process_id}/{proc.num_processes}: {n_local} local of {proc.device_count} devices, "
      f"psum of process ids = {total} (expected {expected})", flush=True)
if total != expected:
    raise SystemExit(1)
if proc.num_processes > 1:
    jax.distributed.shutdown()
