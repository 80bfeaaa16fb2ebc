"""Seconds of one cross-process all-reduce (psum) between 2 local processes × 1 CPU device.

    python -m benchmarks.collective [--repeats N]        (starts the 2 processes itself)

Times a psum of the gradient-sized buffer (every fp32 parameter of the MLP) and of one float, each
waited for, as the training step does once per step. This is what bounds the 2-process epoch.
Prints one JSON object (rank 0's medians).
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
    psum = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    result = {}
    for name, n in (("gradients", flopcount.param_count()), ("scalar", 1)):
        x = np.ones((1, n), np.float32)
        jax.block_until_ready(psum(x))
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            jax.block_until_ready(psum(x))
            samples.append(time.perf_counter() - started)
        result[name] = {"bytes": 4 * n, "seconds": statistics.median(samples), "min_seconds": min(samples)}
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
