"""Goodput on real pods: a longer job with one worker pod deleted every N seconds.

    python -m benchmarks.goodput [--target jobset] [--epochs 20] [--every 120] [--output FILE]
    python -m benchmarks.goodput --markdown FILE   (the figures of a saved report)

Needs root and `scripts/setup.sh cluster node`; takes the host's cluster lock as
benchmarks.recovery does and runs the same 2-host CPU job (its variables, with `--epochs` epochs).
From the first training step on, every `--every` seconds one worker pod is deleted
(`kubectl delete pod`, alternately rank 1 and rank 0) until the job ends. From the job's own metrics
records (one every 10 steps, with their `time`):

- step seconds: the time between consecutive step records ÷ the steps between them, summed over
  the pairs within one attempt, leaving out each attempt's first record (compile) and pairs across
  an epoch's end (evaluation), i.e. the mean time of a step while training runs;
- goodput = total steps × step seconds ÷ wall seconds, the wall taken from the first attempt's
  first step record to the `end` record (`goodput`), and from `kubectl apply` (`goodput_from_apply`,
  which adds the first start-up);
- steps redone: per restart, the last step recorded before it minus the step it resumed from;
- seconds lost per restart: from the last step record before it to the first after it, less the
  steps between them at the step time; evaluation: the same across each epoch's end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from benchmarks.cli import report_options, stamp
from benchmarks.procs import read_report, publish
from benchmarks.recovery import LOG_EVERY, SCRIPTS, TARGETS, Session, cluster_lock, log, rank_of, records, run


def attempts(recs: list[dict]) -> list[list[dict]]:
    """The metrics records split at each `start` record (one list per attempt, the start first)."""
    out: list[list[dict]] = []
    for r in recs:
        if r.get("event") == "start":
            out.append([])
        if out:
            out[-1].append(r)
    return out


def goodput_figures(recs: list[dict], applied: float, faults: list[float]) -> dict:
    runs = attempts(recs)
    seconds = steps_timed = 0.0
    for attempt in runs:
        steps = [r for r in attempt if r.get("event") == "step"]
        for a, b in zip(steps[1:], steps[2:]):  # not the first: it holds the compile
            if a["epoch"] == b["epoch"] and b["step"] > a["step"]:
                seconds += b["time"] - a["time"]
                steps_timed += b["step"] - a["step"]
    step_seconds = seconds / steps_timed
    end = next(r for r in recs if r.get("event") == "end")
    first_step = next(r for r in recs if r.get("event") == "step")
    total = runs[0][0]["total_steps"]
    redone, lost = [], []
    for before, after in zip(runs, runs[1:]):
        logged = [r for r in before if r.get("event") == "step"]
        # (none where the stop saved a step past the last record: steps done since it were kept)
        redone.append(max(max((r["step"] for r in logged), default=0) - after[0]["step"], 0))
        resumed = next((r for r in after if r.get("event") == "step"), None)
        if logged and resumed:  # wall time between the two records beyond the steps between them
            lost.append(round(resumed["time"] - logged[-1]["time"] - (resumed["step"] - logged[-1]["step"]) * step_seconds, 2))
    evaluation = sum(b["time"] - a["time"] - (b["step"] - a["step"]) * step_seconds for attempt in runs
                     for a, b in pairwise([r for r in attempt if r.get("event") == "step"]) if a["epoch"] != b["epoch"])
    wall = end["time"] - first_step["time"]
    return {"total_steps": total, "step_seconds": round(step_seconds, 5),
            "productive_seconds": round(total * step_seconds, 1),
            "wall_seconds": round(wall, 1), "wall_from_apply_seconds": round(end["time"] - applied, 1),
            "goodput": round(total * step_seconds / wall, 3),
            "goodput_from_apply": round(total * step_seconds / (end["time"] - applied), 3),
            "faults": len(faults), "restarts": len(runs) - 1, "steps_redone": redone,
            "lost_per_restart_seconds": lost, "evaluation_seconds": round(evaluation, 1),
            "resumed_from": [a[0]["step"] for a in runs[1:]]}


def goodput_run(session: Session, target: str, epochs: int, every: float, tmp: Path) -> dict:
    name = f"goodput-{target}"
    build = tmp / name
    outputs = session.prepare(name, target, build, (f"training.epochs={epochs}",))
    metrics_path = outputs / "metrics.jsonl"
    applied = time.time()
    job = session.start(build)
    faults: list[float] = []
    try:
        while not any(r.get("event") == "step" for r in records(metrics_path)):
            if job.poll() is not None:
                raise RuntimeError(f"run.sh exited {job.returncode} before the first step")
            time.sleep(0.5)
        next_fault = time.time() + every
        while job.poll() is None:
            if any(r.get("event") == "end" for r in records(metrics_path)):
                break
            if time.time() >= next_fault:
                rank = 1 - len(faults) % 2
                victim = next((p for p in session.pods(name, target) if rank_of(p, target) == rank
                               and not p["metadata"].get("deletionTimestamp")), None)
                if victim:
                    session.kubectl("delete", "pod", victim["metadata"]["name"], "--wait=false")
                    faults.append(time.time() - applied)
                    log(f"{name}: deleted {victim['metadata']['name']} at {faults[-1]:.0f} s")
                next_fault += every
            time.sleep(0.5)
        code = job.wait(timeout=600)
        if code != 0:
            raise RuntimeError(f"run.sh exited {code}")
        figures = goodput_figures(records(metrics_path), applied, faults)
        figures["fault_times_seconds"] = [round(f, 1) for f in faults]
        figures["metrics_records"] = records(metrics_path)  # the job's own, to check the figures against
    finally:
        session.clean(build, job)
    log(f"{name}: { {k: v for k, v in figures.items() if k != 'metrics_records'} }")
    return figures


def report_text(report: dict) -> str:
    """The report as JSON, the job's metrics records one to a line (last)."""
    figures = {k: v for k, v in report.items() if k != "metrics_records"}
    text = json.dumps(figures, indent=2)
    recs = report.get("metrics_records")
    if recs is None:
        return text
    lines = ",\n".join(f"    {json.dumps(r, sort_keys=True)}" for r in recs)
    return f'{text[:-2]},\n  "metrics_records": [\n{lines}\n  ]\n}}'


def markdown(report: dict) -> str:
    rev = report.get("revision") or {}
    load = report["load_average_before_after"]
    return "\n".join([
        "| target | epochs (steps) | pod deleted every | restarts | goodput | from apply | step time | wall | steps redone |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {report['target']} | {report['epochs']} ({report['total_steps']}) | {report['every_seconds']:g} s | "
        f"{report['restarts']} | {report['goodput']:.3f} | {report['goodput_from_apply']:.3f} | "
        f"{report['step_seconds'] * 1e3:.1f} ms | {report['wall_seconds']:.0f} s | "
        f"{', '.join(map(str, report['steps_redone'])) or '-'} |",
        "", f"Commit {rev.get('commit')}, {report.get('date')}, {report['cpus']} CPUs; load average "
            f"{load[0][0]:.2f} before, {load[1][0]:.2f} after."])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.goodput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="jobset", choices=TARGETS)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--every", type=float, default=120.0, help="seconds between pod deletions")
    report_options(parser)
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(read_report(args.markdown)))
        return 0
    if args.epochs < 1 or args.every <= 0:
        parser.error("--epochs must be >= 1 and --every > 0")
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    report: dict = {**stamp(),
                    "target": args.target, "epochs": args.epochs, "every_seconds": args.every,
                    "log_every": LOG_EVERY, "cpus": os.cpu_count()}
    with cluster_lock(), tempfile.TemporaryDirectory(prefix="jaxt-bench-goodput.") as tmp:
        state = Path(tmp) / "cluster"
        try:
            session = Session(state)
            report.update(goodput_run(session, args.target, args.epochs, args.every, Path(tmp)))
        finally:
            run([SCRIPTS / "cluster" / "down.sh", state], os.environ, 300, check=False)
    publish(report, load_before, args.output, report_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
