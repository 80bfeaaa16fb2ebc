"""Run every benchmark figure; print the JSON report on stdout, progress and a table on stderr.

    python -m benchmarks [--quick] [--kwok-scale] [--output FILE]
    python -m benchmarks --markdown FILE      (the tables of a saved report, for benchmarks/README.md)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import figures, flopcount, procs, report
from benchmarks.figures import median, paired


def machine() -> dict:
    from importlib import metadata

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next((int(line.split()[1]) // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), None)
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_mib": mem, "kernel": platform.release(),
            "python": platform.python_version(), "jax": metadata.version("jax"), "jaxlib": metadata.version("jaxlib")}


def report_type(parser: argparse.ArgumentParser, *keys: str):
    """The argparse type of an option that names a saved report of this parser's benchmark, whose
    reports all hold `keys` (a report of another benchmark is refused)."""
    return procs.saved_report_of(parser.prog.removeprefix("python -m "), *keys)


def report_options(parser: argparse.ArgumentParser, *keys: str) -> None:
    """--output and --markdown, as every real-node benchmark takes them; `keys`: what each of its reports
    holds (report_type)."""
    parser.add_argument("--output", help="also write the JSON report to this file")
    parser.add_argument("--markdown", metavar="FILE", type=report_type(parser, *keys),
                        help="print the figures of a saved report and exit")


def stamp() -> dict:
    """What every report starts with: the commit measured and the date."""
    return {"revision": revision(), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def revision() -> dict:
    """The repository commit measured, and whether trainer/ differed from it (uncommitted changes)."""
    from benchmarks.procs import REPO_ROOT

    def git(*args):
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        return done.stdout.rstrip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--", "trainer", "benchmarks")
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "uncommitted": sorted(line[3:] for line in status.splitlines()) if status else []}


def build_report(mode: figures.Mode, log, kwok_scale: bool = False) -> dict:
    load_before = os.getloadavg()
    started = time.time()
    one = figures.single_process(mode, log)
    two = figures.two_processes(mode, log)
    first = figures.first_step(mode, log)
    warm = None
    if mode.warm_cache:
        with tempfile.TemporaryDirectory(prefix="jaxt-cache-") as cache:
            warm = figures.first_step(mode, log, Path(cache))
    flops = figures.step_flops(mode, log)
    allreduce = figures.allreduce_bytes(mode, log)
    stall = figures.checkpoint_stall(mode, log)
    jaxgen = figures.jaxgen_render(mode, log)
    # Last, so its control plane's load does not reach the trainer figures.
    scale = kwok_scale_run(mode, log) if kwok_scale else None

    def col(rows, program, *keys):
        out = []
        for row in rows:
            value = row[program]
            for key in keys:
                value = value[key]
            out.append(value)
        return out

    ips = {name: col(one["runs"], name, "images_per_second") for name in figures.RUNS_1X1}
    t_ips, b_ips = ips["trainer"], ips["baseline"]
    t_ep1, b_ep1 = col(one["runs"], "trainer", "epoch_seconds"), col(one["runs"], "baseline", "epoch_seconds")
    t_ep2, b_ep2 = col(two["runs"], "trainer", "epoch_seconds"), col(two["runs"], "baseline", "epoch_seconds")
    acc = {name: col(one["runs"], name, "to_accuracy") for name in figures.RUNS_1X1}
    t_acc, b_acc = acc["trainer"], acc["baseline"]
    t_first, b_first = col(first["runs"], "trainer", "seconds"), col(first["runs"], "baseline", "seconds")
    t_scale = [figures.ratio(a, b) for a, b in zip(t_ep2, t_ep1)]
    b_scale = [figures.ratio(a, b) for a, b in zip(b_ep2, b_ep1)]

    def accuracy(rows):
        return {"seconds": median([r["seconds"] for r in rows]), "epochs": median([r["epochs"] for r in rows]),
                "reached": all(r["seconds"] is not None for r in rows),
                "best_test_accuracy": median([r["best_test_accuracy"] for r in rows]), "samples": rows}

    def fastest_over_fp32(t, t16):
        """Per repeat: the faster precision's time to the goal ÷ float32's (None if float32 missed it)."""
        times = [x for x in (t["seconds"], t16["seconds"]) if x is not None]
        return figures.ratio(min(times), t["seconds"]) if times and t["seconds"] else None

    results = {
        "epoch_images_per_second": {
            **{name: median(values) for name, values in ips.items()},
            "vs_baseline": paired(list(zip(t_ips, b_ips))),
            "bf16_vs_baseline": paired(list(zip(ips["trainer_bf16"], b_ips))),
            "synced_vs_baseline": paired(list(zip(ips["baseline_synced"], b_ips))),
            "vs_baseline_synced": paired(list(zip(t_ips, ips["baseline_synced"]))),
            "trainer_flops_per_second": figures.flop_rate_of_epochs(median(t_ips)),
            "trainer_over_roofline": figures.ratio(figures.flop_rate_of_epochs(median(t_ips)),
                                                   flops["roofline_flops_per_second"]),
            "samples": ips},
        "step_flops": flops,
        "first_step_wall_2proc": {
            "trainer": median(t_first), "baseline": median(b_first), "vs_baseline": paired(list(zip(t_first, b_first))),
            "trainer_phases": {k: median([r["trainer"]["phases"][k] for r in first["runs"]])
                               for k in first["runs"][0]["trainer"]["phases"]},
            "trainer_warm_compilation_cache": median(col(warm["runs"], "trainer", "seconds")) if warm else None,
            "samples": {"trainer": t_first, "baseline": b_first}},
        "accuracy_98_wall_1proc": {
            **{name: accuracy(rows) for name, rows in acc.items()},
            "vs_baseline": paired([(t["seconds"], b["seconds"]) for t, b in zip(t_acc, b_acc)]),
            "fastest_over_fp32": median([fastest_over_fp32(t, t16) for t, t16 in zip(t_acc, acc["trainer_bf16"])])},
        "scaling_2x1_over_1x1": {
            "trainer": median(t_scale), "baseline": median(b_scale), "vs_baseline": paired(list(zip(t_scale, b_scale))),
            "epoch_seconds": {"trainer_1x1": median(t_ep1), "trainer_2x1": median(t_ep2),
                              "baseline_1x1": median(b_ep1), "baseline_2x1": median(b_ep2)}},
        "allreduce_bytes_per_step": {
            "trainer": allreduce["trainer_pmap"]["bytes_per_step"], "baseline": allreduce["baseline"]["bytes_per_step"],
            "vs_baseline": figures.ratio(allreduce["trainer_pmap"]["bytes_per_step"],
                                         allreduce["baseline"]["bytes_per_step"]),
            "gradient_bytes_analytic": 4 * flopcount.param_count(),
            "seconds_2proc": allreduce["timing_2proc"]["gradients"]["seconds"],
            "seconds_2proc_as_arrays": allreduce["timing_2proc"]["gradient_arrays"]["seconds"],
            "arrays_over_one_buffer_2proc": allreduce["timing_2proc"]["arrays_over_one_buffer"],
            "detail": allreduce},
        "jaxgen_render_wall": jaxgen,
        "checkpoint_stall": stall,
        "kwok_scale": scale,
    }
    return {
        "mode": mode.name,
        "date": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_seconds": round(time.time() - started, 1),
        "revision": revision(),
        "machine": {**machine(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "settings": {"batch_size": 128, "processes_x_devices": "1x1 unless stated", "repeats": mode.repeats,
                     "train_examples": mode.train_examples or 60000, "epochs_1x1": mode.epochs_1x1,
                     "epochs_2x1": mode.epochs_2x1, "first_step_repeats": mode.first_step_repeats,
                     "flops_repeats": mode.flops_repeats, "jaxgen_repeats": mode.jaxgen_repeats,
                     "trainer_args_1x1": one["args"], "trainer_args_2x1": two["args"],
                     "trainer_args_first_step": first["args"]},
        "flop_count": flopcount.describe(128),
        "results": results,
        "targets": report.targets(results),
    }


def kwok_scale_run(mode: figures.Mode, log) -> dict:
    from benchmarks import kwok_scale

    hosts = [16, 256, 1024] if mode.name == "full" else [16, 256]
    try:
        return kwok_scale.run(hosts, max(hosts), kwok_scale.TUNED_API_QPS, timeout=300, log=log)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:  # keep the trainer figures measured so far
        log(f"kwok scale failed: {exc}")
        return {"error": str(exc)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 repeat, 2560-example epochs (a smoke run, ~1-2 min)")
    p.add_argument("--output", help="also write the JSON report to this file")
    p.add_argument("--kwok-scale", action="store_true",
                   help="also start a kwok cluster and time 16/256/1024-host releases on as many fake nodes "
                        "(benchmarks/kwok_scale.py; 256 hosts at most with --quick)")
    p.add_argument("--markdown", metavar="REPORT_JSON", type=report_type(p, "mode", "results"),
                   help="print the tables of a saved report as Markdown and exit")
    args = p.parse_args(argv)
    if args.markdown:
        print(report.markdown(args.markdown))
        return 0
    mode = figures.QUICK if args.quick else figures.FULL
    # SIGTERM unwinds like an exception, so every started process group is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    log(f"mode {mode.name}; load average {os.getloadavg()}")
    result = build_report(mode, log, kwok_scale=args.kwok_scale)
    text = json.dumps(result, indent=2)
    if args.output:
        procs.write_report(args.output, text)
    print(report.table(result), file=sys.stderr)
    print(text)
    return 0
