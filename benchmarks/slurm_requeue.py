"""A stop signal on the real SLURM tier, to the first step of the requeued job.

    python -m benchmarks.slurm_requeue [--repeats 3] [--output FILE]
    python -m benchmarks.slurm_requeue --markdown FILE   (the figures of a saved report)

Needs root and `scripts/slurm/setup.sh`. Starts its own SLURM (scripts/slurm/up.sh on a state
directory and ports of its own; down.sh at the end) and, per repeat, submits the 2-task CPU job of
the SLURM tests with `slurm.requeue` on and no periodic checkpoints, waits for step 60, and sends
`scancel --signal=TERM` (what a preemption or the `--signal=USR1@…` warning delivers). Marks, in
seconds after the signal (wall clock; the trainer's metrics records carry `time`):

- saved: the stop checkpoint's record (both processes agreed on a step and it is on disk);
- left: the job left RUNNING (its tasks exited with the stop code and the script requeued it);
- running again: SLURM started the requeued job (squeue, polled every 0.2 s);
- resumed: the requeued job's first step record after its resume (it restored the checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cli import report_options, stamp
from benchmarks.procs import MNIST_DIR, REPO_ROOT, free_port, publish

SLURM_SCRIPTS = REPO_ROOT / "scripts" / "slurm"
MARKS = ("saved", "left", "running_again", "resumed")
SIGNAL_AT_STEP = 60
TIMEOUT = 600


class Slurm:
    """A SLURM of its own: started on a fresh state directory, stopped (and wiped) on exit."""

    def __init__(self, state: Path):
        self.env = {**os.environ, "JAXT_SLURM_DIR": str(state), "JAXT_SLURMCTLD_PORT": str(free_port()),
                    "JAXT_SLURMD_PORT": str(free_port()), "JAXT_SLURM_PARTITION": "debug",
                    "JAXT_SLURM_FIRST_JOB_ID": str(random.randrange(5000, 9000) * 100)}
        self.env["PATH"] = self.env.get("PATH", "") + ":/usr/sbin:/sbin"

    def __enter__(self):
        up = subprocess.run([str(SLURM_SCRIPTS / "up.sh"), "--owner-pid", str(os.getpid())], env=self.env,
                            capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            self.__exit__()
            raise RuntimeError(f"scripts/slurm/up.sh failed ({up.returncode}): {up.stderr[-3000:]}")
        self.env["SLURM_CONF"] = re.search(r"^export SLURM_CONF=(\S+)$", up.stdout, re.M).group(1)
        return self

    def __exit__(self, *exc):
        subprocess.run([str(SLURM_SCRIPTS / "down.sh")], env=self.env, capture_output=True, timeout=120)

    def run(self, *argv: str, cwd: Path | None = None) -> str:
        done = subprocess.run(argv, env=self.env, cwd=cwd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
        return done.stdout.strip()

    def state(self, job: int) -> str:
        """The job's state in the queue ('' once it has left)."""
        return self.run("squeue", "-h", "-j", str(job), "-o", "%T")


def variables(work: Path, name: str) -> dict:
    return {"name": name, "target": "slurm", "hosts_count": 2, "local_device_count": 1, "accelerator": "cpu",
            "training": {"epochs": 1, "batch_size": 256, "learning_rate": 0.1},
            "data": {"dir": str(work / "data"), "download": True, "mirror": f"file://{MNIST_DIR}/"},
            "checkpoint": {"dir": str(work / "checkpoints"), "every_steps": 0},
            "env": [{"name": "PYTHONPATH", "value": str(REPO_ROOT)}],
            "slurm": {"nodes": 1, "time": "00:15:00", "python": sys.executable, "requeue": True,
                      "output": str(work / "%x-%j.out")}}


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]


def one_run(slurm: Slurm, work: Path, name: str) -> dict:
    work.mkdir(parents=True)
    (work / "variables.json").write_text(json.dumps(variables(work, name)))
    subprocess.run([sys.executable, "-m", "generator", "render", str(work / "variables.json"), "-o",
                    str(work / "rendered")], cwd=REPO_ROOT, check=True, capture_output=True, timeout=120)
    job = int(slurm.run("sbatch", "--parsable", str(work / "rendered" / f"{name}.sbatch"), cwd=work).split(";")[0])
    metrics = work / "checkpoints" / name / "metrics.jsonl"
    deadline = time.monotonic() + TIMEOUT
    while not any(r.get("event") == "step" and r["step"] >= SIGNAL_AT_STEP for r in records(metrics)):
        if time.monotonic() > deadline or not slurm.state(job):
            raise RuntimeError(f"job {job} did not reach step {SIGNAL_AT_STEP}: {_output(work, name, job)}")
        time.sleep(0.2)
    signalled = time.time()
    slurm.run("scancel", "--signal=TERM", str(job))
    marks: dict[str, float] = {}
    while "running_again" not in marks:
        state = slurm.state(job)
        if state != "RUNNING" and "left" not in marks:
            marks["left"] = time.time() - signalled
        elif state == "RUNNING" and "left" in marks:
            marks["running_again"] = time.time() - signalled
        if time.monotonic() > deadline or not state:
            raise RuntimeError(f"job {job} was not requeued and started again: {_output(work, name, job)}")
        time.sleep(0.2)
    while "resumed" not in marks:
        recs = records(metrics)
        starts = [i for i, r in enumerate(recs) if r.get("event") == "start"]
        saved = [r for r in recs if r.get("event") == "checkpoint"]
        if saved:
            marks["saved"] = saved[0]["time"] - signalled
        if len(starts) > 1:
            step = next((r for r in recs[starts[1]:] if r.get("event") == "step"), None)
            if step:
                marks["resumed"] = step["time"] - signalled
                resumed_from = recs[starts[1]]["step"]
        if time.monotonic() > deadline or not slurm.state(job):
            raise RuntimeError(f"job {job} did not resume: {_output(work, name, job)}")
        time.sleep(0.2)
    slurm.run("scancel", str(job))
    return {"job": job, "saved_step": resumed_from, **{k: round(marks[k], 2) for k in MARKS}}


def _output(work: Path, name: str, job: int) -> str:
    path = work / f"{name}-{job}.out"
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(no output)"


def markdown(report: dict) -> str:
    rows = ["| mark (s after the signal) | median | max |", "|---|---|---|"]
    for mark in MARKS:
        values = [r[mark] for r in report["runs"]]
        rows.append(f"| {mark.replace('_', ' ')} | {statistics.median(values):.1f} | {max(values):.1f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slurm_requeue", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    report_options(parser, "signal_at_step", "runs")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(args.markdown))
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if os.geteuid() != 0:
        parser.error("the local SLURM runs its daemons as root")
    load_before = os.getloadavg()
    report: dict = {**stamp(),
                    "signal_at_step": SIGNAL_AT_STEP, "cpus": os.cpu_count(), "runs": []}
    # The state directory on its own (up.sh opens it to munged's user; down.sh removes it).
    state = Path(tempfile.mkdtemp(prefix="jaxt-bench-slurm."))
    with tempfile.TemporaryDirectory(prefix="jaxt-bench-requeue.") as tmp, Slurm(state) as slurm:
        for repeat in range(args.repeats):
            run = one_run(slurm, Path(tmp) / f"run{repeat}", f"requeue-{repeat}")
            print(f"[slurm-requeue] {json.dumps(run)}", file=sys.stderr, flush=True)
            report["runs"].append(run)
    report["median"] = {m: statistics.median(r[m] for r in report["runs"]) for m in MARKS}
    publish(report, load_before, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
