"""Figures of the real-node tier: image build, node start, and how fast a job gets going in real pods.

    python -m benchmarks.node [--repeats N] [--output FILE]

Needs root and `scripts/setup.sh cluster node`. Each repeat starts a control plane with one real
node (scripts/cluster/up.sh --real-node), runs the 2-host CPU Indexed Job of
variables/examples/cpu-local.json for one epoch with scripts/run.sh (MNIST on a node volume), and
stops the cluster. Every line run.sh prints is timestamped on arrival, so "apply → first training
step logged" is read off rank 0's streamed log. The JSON report goes to stdout; medians over repeats.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.procs import MNIST_DIR, REPO_ROOT, publish

SCRIPTS = REPO_ROOT / "scripts"
NAMESPACE = "jax-bench"
# Milestones of run.sh's output (rank 0's log is streamed into it), by the first line containing each.
MILESTONES = {
    "rank0_log_stream": "logs of rank 0",
    "jax_initialised": "global devices",
    "first_step_logged": "batch 100/",
    "training_completed": "training completed.",
}


EPOCH_LINE = re.compile(r"test accuracy=([0-9.]+), ([0-9.]+) s,")


def log(message: str) -> None:
    print(f"[benchmarks.node] {message}", file=sys.stderr, flush=True)


def timed(args: list, timeout: float, env: dict | None = None) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return time.monotonic() - started, proc.stdout


def image_build() -> dict:
    """A full rebuild of the CPU image on the cached base (no layer cache), and its size."""
    seconds, _ = timed([SCRIPTS / "image.sh", "--rebuild"], timeout=1800)
    _, archive = timed([SCRIPTS / "image.sh", "--print-archive"], timeout=60)
    return {"build_seconds": round(seconds, 1),
            "archive_mib": round(Path(archive.strip()).stat().st_size / 2**20, 1)}


def run_job(env: dict, build: Path) -> dict:
    """scripts/run.sh of a prepared build; seconds from its apply to each milestone of its output."""
    proc = subprocess.Popen([str(SCRIPTS / "run.sh"), "--timeout", "600", str(build)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    started = time.monotonic()
    lines: list[tuple[float, str]] = []

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic(), line))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=700)
    ended = time.monotonic()
    reader.join(timeout=10)
    if code != 0:
        raise RuntimeError(f"run.sh exited {code}:\n{''.join(line for _, line in lines)[-3000:]}")

    def first(marker: str) -> float | None:
        return next((t for t, line in lines if marker in line), None)
    applied = first("applying")
    if applied is None:
        raise RuntimeError("run.sh did not say it was applying")
    figures = {f"apply_to_{key}_seconds": round(t - applied, 2)
               for key, marker in MILESTONES.items() if (t := first(marker)) is not None}
    figures["run_sh_seconds"] = round(ended - started, 2)
    # rank 0's epoch line: "..., test accuracy=0.9741, 31.2 s, 1923 examples/s"
    epochs = [m for _, line in lines if (m := EPOCH_LINE.search(line))]
    if epochs:
        figures["test_accuracy"] = float(epochs[-1][1])
        figures["epoch_seconds"] = float(epochs[-1][2])
    return figures


def one_repeat(repeat: int) -> dict:
    state = Path(tempfile.mkdtemp(prefix="jaxt-bench-node."))
    try:
        up_seconds, out = timed([SCRIPTS / "cluster" / "up.sh", "--real-node", "--state-dir", state,
                                 "--namespace", NAMESPACE, "--owner-pid", os.getpid()], timeout=1800)
        env = dict(os.environ, KUBECONFIG=out.strip().splitlines()[-1])
        timed([SCRIPTS / "cluster" / "host-volume.sh", state, NAMESPACE, "mnist", MNIST_DIR], 180, env)
        _, image = timed([SCRIPTS / "image.sh"], timeout=1800)
        repository, tag = image.strip().rsplit(":", 1)
        build = state / "build"
        timed([SCRIPTS / "prepare.sh", "-o", build, "--set", f"namespace={NAMESPACE}",
               "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
               "--set", "image.pull_policy=Never", "--set", "training.epochs=1", "--set", "data.download=false",
               "--set-json", 'data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}'],
              timeout=120, env=env)
        figures = {"node_tier_up_seconds": round(up_seconds, 1), **run_job(env, build)}
    finally:
        down_started = time.monotonic()
        subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], capture_output=True, timeout=300)
    figures["node_tier_down_seconds"] = round(time.monotonic() - down_started, 1)
    log(f"repeat {repeat + 1}: {figures}")
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.node", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-image-build", action="store_true", help="skip the image rebuild figure")
    parser.add_argument("--output", help="also write the JSON report to this file")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    report: dict = {"repeats": args.repeats}
    if not args.no_image_build:
        log("rebuilding the CPU image (no layer cache)")
        report["image"] = image_build()
    runs = [one_repeat(i) for i in range(args.repeats)]
    report["runs"] = runs
    report["median"] = {key: statistics.median(r[key] for r in runs if key in r)
                        for key in runs[0]}
    publish(report, load_before, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
