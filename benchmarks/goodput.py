"""Goodput on real pods: a longer job with one worker pod deleted every N seconds.

    python -m benchmarks.goodput [--target jobset] [--epochs 20] [--every 120] [--repeats 1] [--output FILE]
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

With `--repeats N` the job runs N times, each on a fresh control plane and node; the report keeps
each run's figures under `runs` with the median and the minimum goodput.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import statistics
import time
from itertools import pairwise
from pathlib import Path

from benchmarks.cli import report_options, stamp
from benchmarks.procs import publish
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
    job = session.start(build, timeout=max(900, 60 * epochs))  # a loaded machine trains slower
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
    """The report as JSON, each run's metrics records one to a line (last)."""
    def one(run: dict, indent: str) -> str:
        figures = {k: v for k, v in run.items() if k != "metrics_records"}
        text = json.dumps(figures, indent=2).replace("\n", "\n" + indent)
        recs = run.get("metrics_records")
        if recs is None:
            return text
        lines = ",\n".join(f"{indent}    {json.dumps(r, sort_keys=True)}" for r in recs)
        return f'{text[:-len(indent) - 2]},\n{indent}  "metrics_records": [\n{lines}\n{indent}  ]\n{indent}}}'
    if "runs" not in report:
        return one(report, "")
    head = json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2)
    runs = ",\n".join("    " + one(run, "    ") for run in report["runs"])
    return f'{head[:-2]},\n  "runs": [\n{runs}\n  ]\n}}'


def runs_of(report: dict) -> list[dict]:
    """A report's runs: those of --repeats, or the report itself (one run)."""
    return report.get("runs", [report])


def _evaluation(run: dict) -> str:
    """The seconds of the per-epoch evaluations, and their share of the wall."""
    if "evaluation_seconds" not in run:
        return "-"
    return f"{run['evaluation_seconds']:.1f} s ({run['evaluation_seconds'] / run['wall_seconds']:.1%})"


def markdown(report: dict) -> str:
    rev = report.get("revision") or {}
    load = report["load_average_before_after"]
    rows = [f"| {report['target']} | {report['epochs']} ({run['total_steps']}) | {report['every_seconds']:g} s | "
            f"{run['restarts']} | {run['goodput']:.3f} | {run['goodput_from_apply']:.3f} | "
            f"{run['step_seconds'] * 1e3:.1f} ms | {run['wall_seconds']:.0f} s | "
            f"{', '.join(f'{s:.1f}' for s in run.get('lost_per_restart_seconds', [])) or '-'} | "
            f"{_evaluation(run)} | {', '.join(map(str, run['steps_redone'])) or '-'} |" for run in runs_of(report)]
    summary = []
    if "runs" in report:
        summary = ["", f"Goodput over {len(report['runs'])} runs: median **{report['goodput_median']:.3f}**, "
                       f"minimum {report['goodput_min']:.3f}."]
    return "\n".join([
        "| target | epochs (steps) | pod deleted every | restarts | goodput | from apply | step time | wall | "
        "s lost per restart | evaluation | steps redone |",
        "|---|---|---|---|---|---|---|---|---|---|---|", *rows, *summary,
        "", f"Commit {rev.get('commit')}, {report.get('date')}, {report['cpus']} CPUs; load average "
            f"{load[0][0]:.2f} before, {load[1][0]:.2f} after."])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.goodput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="jobset", choices=TARGETS)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--every", type=float, default=120.0, help="seconds between pod deletions")
    parser.add_argument("--repeats", type=int, default=1, help="runs, each on a fresh control plane and node")
    report_options(parser, "target", "every_seconds")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(args.markdown))
        return 0
    if args.epochs < 1 or args.every <= 0 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1 and --every > 0")
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    report: dict = {**stamp(),
                    "target": args.target, "epochs": args.epochs, "every_seconds": args.every,
                    "log_every": LOG_EVERY, "cpus": os.cpu_count()}
    runs = []
    with cluster_lock():
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="jaxt-bench-goodput.") as tmp:
                state = Path(tmp) / "cluster"
                try:
                    session = Session(state)
                    runs.append(goodput_run(session, args.target, args.epochs, args.every, Path(tmp)))
                finally:
                    run([SCRIPTS / "cluster" / "down.sh", state], os.environ, 300, check=False)
    if args.repeats == 1:
        report.update(runs[0])
    else:
        goodputs = [r["goodput"] for r in runs]
        report.update(goodput_median=statistics.median(goodputs), goodput_min=min(goodputs), runs=runs)
    publish(report, load_before, args.output, report_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
