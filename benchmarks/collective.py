"""Seconds of one cross-process all-reduce (psum) between 2 local processes × 1 CPU device.

    python -m benchmarks.collective [--repeats N]        (starts the 2 processes itself)

Times, interleaved and each waited for, a psum of: the gradient-sized buffer (every fp32 parameter
of the MLP in one array, as the trainer's step all-reduces it once per step); the same bytes as
the MLP's 6 parameter arrays in one all-reduce (XLA's CPU runtime makes one gloo call per array:
what the step did before its gradients were flattened); one float. Prints one JSON object (rank
0's medians, and the median over repeats of arrays ÷ one buffer).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks import flopcount
from benchmarks.procs import REPO_ROOT, free_port


def _rank(rank: int, port: int, repeats: int) -> int:
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 1)
    jax.distributed.initialize(f"127.0.0.1:{port}", 2, rank, cluster_detection_method="deactivate",
                               initialization_timeout=60)
    from trainer import models

    psum = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    params = models.get(models.DEFAULT).network().init_params(0)
    cases = {"gradients": np.ones((1, flopcount.param_count()), np.float32),
             "gradient_arrays": {k: np.ones((1, *v.shape), np.float32) for k, v in params.items()},
             "scalar": np.ones((1, 1), np.float32)}
    samples = {name: [] for name in cases}
    for x in cases.values():
        jax.block_until_ready(psum(x))
    for _ in range(repeats):
        for name, x in cases.items():
            started = time.perf_counter()
            jax.block_until_ready(psum(x))
            samples[name].append(time.perf_counter() - started)
    result = {name: {"bytes": sum(4 * a.size for a in jax.tree.leaves(x)), "arrays": len(jax.tree.leaves(x)),
                     "seconds": statistics.median(samples[name]), "min_seconds": min(samples[name])}
              for name, x in cases.items()}
    result["arrays_over_one_buffer"] = statistics.median(
        a / b for a, b in zip(samples["gradient_arrays"], samples["gradients"]))
    jax.distributed.shutdown()
    if rank == 0:
        print(json.dumps(result), flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.collective")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=180)
    args = p.parse_args(argv)
    if args.rank is not None:
        return _rank(args.rank, args.port, args.repeats)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    ranks = [subprocess.Popen([sys.executable, "-m", "benchmarks.collective", "--repeats", str(args.repeats),
                               "--rank", str(r), "--port", str(port)], cwd=REPO_ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
             for r in range(2)]
    try:
        out, _ = ranks[0].communicate(timeout=args.timeout)
        ranks[1].wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"benchmarks.collective: no result within {args.timeout:g} s") from None
    finally:
        for proc in ranks:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if ranks[0].returncode or ranks[1].returncode:
        raise SystemExit(f"benchmarks.collective: ranks exited with {[r.returncode for r in ranks]}")
    print(out.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
