"""Epoch time of the two JAX lines side by side, in pods on the real node.

    python -m benchmarks.jax_versions [--repeats N] [--output FILE]

Needs root and `scripts/setup.sh cluster node`. Starts one control plane with a real node
(scripts/cluster/up.sh --real-node), imports the trixie image (scripts/image.sh --debian trixie:
Python 3.13 and the newest JAX) beside the default bookworm one (Python 3.11, jax 0.10), then runs the
2-host CPU Indexed Job of variables/examples/cpu-local.json for one epoch with each image in turn,
alternating which goes first, and reads rank 0's epoch time and test accuracy off its streamed log.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.node import NAMESPACE, SCRIPTS, log, run_job, timed
from benchmarks.procs import MNIST_DIR, REPO_ROOT, publish

DEBIAN = ("bookworm", "trixie")


def node_setting(key: str) -> str:
    for line in (SCRIPTS / "cluster" / "node.env").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1]
    raise KeyError(key)


def one_run(env: dict, state: Path, image: str, run: str) -> dict:
    repository, tag = image.rsplit(":", 1)
    build = state / run
    timed([SCRIPTS / "prepare.sh", REPO_ROOT / "variables" / "examples" / "cpu-local.json", "-o", build,
           "--set", f"name={run}", "--set", f"namespace={NAMESPACE}",
           "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
           "--set", "image.pull_policy=Never", "--set", "training.epochs=1", "--set", "data.download=false",
           "--set-json", 'data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}'],
          timeout=120, env=env)
    figures = run_job(env, build)
    timed([SCRIPTS / "clean.sh", build], timeout=180, env=env)
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jax_versions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="also write the JSON report to this file")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    images = {debian: timed([SCRIPTS / "image.sh", "--debian", debian], timeout=1800)[1].strip() for debian in DEBIAN}
    trixie_archive = timed([SCRIPTS / "image.sh", "--debian", "trixie", "--print-archive"], 60)[1].strip()
    state = Path(tempfile.mkdtemp(prefix="jaxt-bench-jax."))
    runs: dict[str, list[dict]] = {debian: [] for debian in DEBIAN}
    try:
        _, out = timed([SCRIPTS / "cluster" / "up.sh", "--real-node", "--state-dir", state, "--namespace", NAMESPACE,
                        "--owner-pid", os.getpid()], timeout=1800)
        env = dict(os.environ, KUBECONFIG=out.strip().splitlines()[-1])
        timed([SCRIPTS / "cluster" / "host-volume.sh", state, NAMESPACE, "mnist", MNIST_DIR], 180, env)
        timed(["ctr", "--address", node_setting("CONTAINERD_SOCKET"), "-n", "k8s.io", "images", "import",
               trixie_archive], 300)
        for repeat in range(args.repeats):
            for debian in DEBIAN if repeat % 2 == 0 else reversed(DEBIAN):
                figures = one_run(env, state, images[debian], f"jax-{debian}-{repeat}")
                log(f"{debian} repeat {repeat + 1}: {figures}")
                runs[debian].append(figures)
    finally:
        subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], capture_output=True, timeout=300)
    report = {"images": images, "repeats": args.repeats, "runs": runs,
              "median": {debian: {key: statistics.median(r[key] for r in rs)
                                  for key in ("epoch_seconds", "test_accuracy", "run_sh_seconds")}
                         for debian, rs in runs.items()}}
    publish(report, load_before, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
