"""A restarted trainer's start-up on this machine, phase by phase: no cluster, 2 local processes.

    python -m benchmarks.restart [--repeats 3] [--before DIR] [--output FILE] [-- TRAINER FLAGS]

Per repeat, in a fresh outputs folder: 2 processes × 1 CPU device train the job of the recovery
benchmark (batch 128, full MNIST, a checkpoint every 100 steps, a record every 10) until both are
SIGKILLed after step 150 (`--fault-after-step`); then 2 new processes start on the same outputs (its
checkpoint of step 100, its compilation cache) and are killed once rank 0 records its first step.
Marks are seconds from their Popen to rank 0's log lines (stamped as they arrive), as
benchmarks/recovery.py reads them on real pods, and to its first step record (its own `time`):

- process_first_log: `cluster: ` (interpreter, the supervisor and its child, the trainer's imports);
- jax_imported_data_loaded: `compilation cache: ` (import jax ∥ read MNIST);
- distributed_initialised: `global devices` (every process joined, backend up);
- restored: `resuming from the checkpoint` (read by rank 0, broadcast);
- first_step: the `first_step` record of step 101 (the state on the devices, compilation or the
  cache, one step; a trainer before that record: the step record of step 110, 10 steps);
- first_record: the step record of step 110.

The `start` record's phases (trainer/goodput.py) come along. `--before DIR`: a folder holding
another revision's trainer/ (`git archive REV trainer | tar -x -C DIR`), run in turns with this
checkout's, so that both see the same moments of a shared machine's load. JSON on stdout (and
--output), the medians of every mark, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.cli import stamp
from benchmarks.procs import MNIST_DIR, REPO_ROOT, _pump, free_port, publish

ARGS = ["--batch-size", "128", "--log-every", "10", "--checkpoint-every", "100", "--epochs", "1"]
KILLED_AT = 150
MARKS = {"process_first_log": "cluster: ", "jax_imported_data_loaded": "compilation cache: ",
         "distributed_initialised": "global devices", "restored": "resuming from the checkpoint"}


def log(message: str) -> None:
    print(f"[benchmarks.restart] {message}", file=sys.stderr, flush=True)


def _start(root: Path, outputs: Path, extra: list[str], timeout: float,
           until_step: int | None) -> tuple[float, list, Path]:
    """2 trainer processes on `outputs`; (their start, rank 0's stamped lines, the metrics file).
    With `until_step`, both are killed once rank 0's metrics hold that step's record."""
    port, metrics = free_port(), outputs / "jax-training" / "metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}
    lines: list[list] = [[], []]
    started, popens = time.time(), []
    for rank in range(2):
        argv = [sys.executable, "-m", "trainer", "train", "--data-dir", str(MNIST_DIR), "--no-download",
                "--checkpoint-dir", str(outputs), "--local-device-count", "1", "--num-processes", "2",
                "--process-id", str(rank), "--coordinator-address", f"127.0.0.1:{port}", *ARGS, *extra]
        p = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        threading.Thread(target=_pump, args=(p.stdout, lines[rank], True), daemon=True).start()
        popens.append(p)
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in popens) and time.monotonic() < deadline:
            if until_step and _step_record(metrics, until_step, started):
                break
            time.sleep(0.05)
    finally:
        for p in popens:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return started, lines[0], metrics


def _records(metrics: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _step_record(metrics: Path, step: int, after: float) -> dict | None:
    return next((r for r in _records(metrics) if r.get("event") == "step" and r.get("step") == step
                 and r.get("time", 0) >= after), None)


def one_restart(root: Path, extra: list[str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxt-restart-") as tmp:
        outputs = Path(tmp)
        _start(root, outputs, [*extra, "--fault-after-step", str(KILLED_AT)], timeout, None)
        first = KILLED_AT // 100 * 100 + 10
        started, lines, metrics = _start(root, outputs, extra, timeout, first)
        marks = {name: next((round(t - started, 3) for t, line in lines if text in line), None)
                 for name, text in MARKS.items()}
        step = _step_record(metrics, first, started)
        alone = next((r for r in _records(metrics) if r.get("event") == "first_step" and r.get("time", 0) >= started),
                     step)
        marks["first_step"] = round(alone["time"] - started, 3) if alone else None
        marks["first_record"] = round(step["time"] - started, 3) if step else None
        start = next((r for r in reversed(_records(metrics)) if r.get("event") == "start"), {})
        cache = next((line for _, line in lines if "compilation cache:" in line), None)
        if step is None:
            log("no first step; rank 0's last lines: " + " / ".join(line for _, line in lines[-8:]))
        return {"marks": marks, "start_phases": start.get("phases"), "cache_line": cache}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.restart", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180, help="seconds per run")
    parser.add_argument("--before", type=Path, help="a folder with another revision's trainer/, run in turns")
    parser.add_argument("--output", help="also write the JSON report to this file")
    parser.add_argument("trainer_args", nargs="*", help="more trainer flags (after --)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.before and not (args.before / "trainer" / "__main__.py").is_file():
        parser.error(f"--before {args.before}: no trainer/ in it")
    load = os.getloadavg()
    roots = {"after": REPO_ROOT, **({"before": args.before.resolve()} if args.before else {})}
    runs: dict[str, list] = {name: [] for name in roots}
    for r in range(args.repeats):
        for name, root in roots.items():
            runs[name].append(one_restart(root, args.trainer_args, args.timeout))
            log(f"{name} #{r + 1}: {runs[name][-1]['marks']}")
    marks = [*MARKS, "first_step", "first_record"]
    medians = {name: {mark: _median([run["marks"][mark] for run in done]) for mark in marks}
               for name, done in runs.items()}
    publish({**stamp(), "args": ARGS + args.trainer_args, "runs": runs, "medians": medians}, load, args.output)
    return 0


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


if __name__ == "__main__":
    sys.exit(main())
