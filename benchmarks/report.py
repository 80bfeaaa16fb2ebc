"""Targets (checked against the measured medians) and the short text table."""

from __future__ import annotations

# name, how to read the value from the results, comparison, bound
TARGETS = [
    ("epoch images/s / honest baseline, float32 (1x1, batch 128)",
     lambda r: r["epoch_images_per_second"]["vs_baseline"], ">=", 1.3),
    ("epoch images/s bfloat16 / honest baseline (float32)",
     lambda r: r["epoch_images_per_second"]["bf16_vs_baseline"], ">=", 2.5),
    ("training-step FLOP/s / matmul FLOP/s, float32 (1x1, batch 128)",
     lambda r: r["step_flops"]["trainer_over_roofline"], ">=", 0.8),
    ("start -> 98.0% test accuracy, 1 process: fastest precision / float32",
     lambda r: r["accuracy_98_wall_1proc"]["fastest_over_fp32"], "<=", 0.6),
    ("process start -> first step done, 2 processes (s)",
     lambda r: r["first_step_wall_2proc"]["trainer"], "<=", 3.0),
    ("epoch time 2x1 / 1x1",
     lambda r: r["scaling_2x1_over_1x1"]["trainer"], "<=", 1.5),
    ("step loop blocked per checkpoint / interval between saves (1x1)",
     lambda r: (r.get("checkpoint_stall") or {}).get("stall_over_interval"), "<=", 0.01),
    ("jaxgen render wall (s)",
     lambda r: r["jaxgen_render_wall"]["seconds"], "<=", 0.5),
    ("1024-host Indexed Job: apply -> all pods Running on kwok (s)",
     lambda r: (r.get("kwok_scale") or {}).get("indexed_job_1024_running_seconds"), "<=", 60.0),
]


def targets(results: dict) -> list[dict]:
    out = []
    for name, read, op, bound in TARGETS:
        value = read(results)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        out.append({"name": name, "value": value, "target": f"{op} {bound:g}", "met": met})
    return out


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if abs(value) >= 1e9:
            return f"{value / 1e9:.1f} G{unit}"
        if abs(value) >= 1e4:
            return f"{value:,.0f}{unit}"
        return f"{value:.3g}{unit}" if abs(value) < 10 else f"{value:.1f}{unit}"
    return f"{value}{unit}"


def rows(result: dict) -> list[tuple[str, str, str, str]]:
    """(figure, trainer, baseline, trainer / baseline) rows of the table."""
    r = result["results"]
    ips, fl, fs = r["epoch_images_per_second"], r["step_flops"], r["first_step_wall_2proc"]
    acc, sc, ar = r["accuracy_98_wall_1proc"], r["scaling_2x1_over_1x1"], r["allreduce_bytes_per_step"]

    def acc_cell(a):
        return f"{_fmt(a['seconds'], ' s')} / {_fmt(a['epochs'])} ep" if a["reached"] else \
            f"not reached (best {_fmt(a['best_test_accuracy'])})"

    return [
        ("images/s per epoch after compile (1x1)", _fmt(ips["trainer"]), _fmt(ips["baseline"]),
         _fmt(ips["vs_baseline"])),
        ("  bfloat16", _fmt(ips["trainer_bf16"]), "", _fmt(ips["bf16_vs_baseline"])),
        ("  synced baseline (waits for every step)", "", _fmt(ips["baseline_synced"]),
         _fmt(ips["vs_baseline_synced"])),
        ("training-step FLOP/s (1x1, batch 128)", _fmt(fl["trainer_flops_per_second"], "FLOP/s"),
         _fmt(fl["baseline_flops_per_second"], "FLOP/s"), _fmt(fl["vs_baseline"])),
        ("  fp32 matmul FLOP/s (roofline, same run)", _fmt(fl["roofline_flops_per_second"], "FLOP/s"), "", ""),
        ("  step FLOP/s / roofline", _fmt(fl["trainer_over_roofline"]), _fmt(fl["baseline_over_roofline"]), ""),
        ("  same, synced baseline", "", _fmt(fl["baseline_synced_over_roofline"]), ""),
        ("  bfloat16 step FLOP/s", _fmt(fl["trainer_bf16_flops_per_second"], "FLOP/s"), "",
         _fmt(fl["vs_baseline_bf16"])),
        ("  bfloat16 matmul FLOP/s (roofline, same run)", _fmt(fl["roofline_bf16_flops_per_second"], "FLOP/s"),
         "", ""),
        ("  bfloat16 step FLOP/s / bfloat16 roofline", _fmt(fl["trainer_bf16_over_roofline_bf16"]), "", ""),
        ("  same, best repeat / best repeat", _fmt(fl.get("trainer_over_roofline_best")), "", ""),
        ("  same, batch on device (compute only)", _fmt(fl["device_only_over_roofline"]), "", ""),
        ("  same, data set on device", _fmt(fl["device_data_over_roofline"]), "", ""),
        ("  same, without the optimizer update", _fmt(fl.get("grads_only_over_roofline")), "", ""),
        ("  the step's 8 matmuls alone", _fmt(fl["step_matmuls_over_roofline"]), "", ""),
        ("  same, from the epoch images/s", _fmt(ips["trainer_over_roofline"]), "", ""),
        ("start -> first step done, 2 processes", _fmt(fs["trainer"], " s"), _fmt(fs["baseline"], " s"),
         _fmt(fs["vs_baseline"])),
        ("  phases: imports done / jax up / step done",
         " / ".join(_fmt(fs["trainer_phases"][k]) for k in ("imports_done", "jax_initialized", "first_step_done"))
         + " s", "", ""),
        ("  same, warm compilation cache", _fmt(fs["trainer_warm_compilation_cache"], " s"), "", ""),
        ("start -> 98.0% test accuracy, 1 process", acc_cell(acc["trainer"]), acc_cell(acc["baseline"]),
         _fmt(acc["vs_baseline"])),
        ("  bfloat16; fastest precision / float32", acc_cell(acc["trainer_bf16"]), "",
         _fmt(acc["fastest_over_fp32"])),
        ("epoch time 2x1 / 1x1", _fmt(sc["trainer"]), _fmt(sc["baseline"]), _fmt(sc["vs_baseline"])),
        *[(f"  epoch seconds {layout}", _fmt(sc["epoch_seconds"][f"trainer_{layout}"], " s"),
           _fmt(sc["epoch_seconds"][f"baseline_{layout}"], " s"), "") for layout in ("1x1", "2x1")],
        ("bytes all-reduced per step", f"{ar['trainer']:,}", f"{ar['baseline']:,}", _fmt(ar["vs_baseline"])),
        ("  one such all-reduce, 2 processes", _fmt(ar["seconds_2proc"] * 1e3, " ms"), "", ""),
        *([("  same bytes as the 6 parameter arrays (one gloo call each)",
            _fmt(ar["seconds_2proc_as_arrays"] * 1e3, " ms"), "", _fmt(ar["arrays_over_one_buffer_2proc"]))]
          if "seconds_2proc_as_arrays" in ar else []),  # reports from before the figure existed lack it
        *checkpoint_rows(r.get("checkpoint_stall")),
        ("jaxgen render wall", _fmt(r["jaxgen_render_wall"]["seconds"], " s"), "", ""),
        *[(f"  {r['jaxgen_render_wall']['large_hosts']} hosts, {target}", _fmt(seconds, " s"), "", "")
          for target, seconds in r["jaxgen_render_wall"]["large_seconds"].items()],
    ]


def checkpoint_rows(stall: dict | None) -> list[tuple[str, str, str, str]]:
    if not stall:  # a report from before the figure existed
        return []
    return [
        ("step loop blocked per checkpoint / interval", _fmt(stall["stall_over_interval"]), "", ""),
        ("  blocked / written in the background / interval",
         " / ".join(_fmt(stall[k] * 1e3, " ms") for k in ("blocked_seconds", "write_seconds", "interval_seconds")),
         "", ""),
        ("  the write / interval (a synchronous save's stall)", _fmt(stall["write_over_interval"]), "", ""),
    ]


KWOK_COLUMNS = ("render", "applied", "created", "scheduled", "running", "endpoints", "check", "status")


def kwok_rows(scale: dict | None) -> list[tuple[str, ...]]:
    """(target, hosts, seconds from apply to each mark...) of a kwok_scale result."""
    if not scale or "runs" not in scale:
        return []
    return [(r["target"], str(r["hosts"]), *(_fmt(r.get(f"{c}_seconds"), " s") for c in KWOK_COLUMNS))
            for r in scale["runs"]]


def kwok_markdown(scale: dict) -> list[str]:
    qps = scale.get("api_qps") or "component defaults (20 / 50)"
    return ["", f"kwok tier: {scale['nodes']} fake nodes (Ready {scale['ready_seconds']} s after creation), "
                f"controller-manager and scheduler API QPS {qps}; seconds from the start of `kubectl apply` "
                "(render: jaxgen's wall, before it; check and status: the median wall of `jaxgen check` and "
                "`jaxgen status` while the job runs):", "",
            "| target | hosts | render | applied | all pods created | all bound | all Running | EndpointSlices complete "
            "| jaxgen check | jaxgen status |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *[f"| {' | '.join(row)} |" for row in kwok_rows(scale)]]


def table(result: dict) -> str:
    header = ("figure", "trainer", "baseline", "trainer/baseline")
    body = rows(result)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for row in kwok_rows(result["results"].get("kwok_scale")):
        lines.append("kwok " + " ".join(row[:2]) + " hosts: " + ", ".join(f"{c} {v}" for c, v in zip(KWOK_COLUMNS, row[2:])))
    lines.append("")
    for t in result["targets"]:
        status = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        lines.append(f"target {t['name']}: {_fmt(t['value'])} (target {t['target']}) {status}")
    load = result["machine"]["loadavg_before"]
    lines.append(f"mode {result['mode']}, {result['duration_seconds']} s, load average before "
                 f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """The same table as Markdown (for benchmarks/README.md), with the targets and the machine."""
    lines = ["| figure | trainer | baseline | trainer / baseline |", "|---|---|---|---|"]
    lines += [f"| {a.strip() if not a.startswith('  ') else '&nbsp;&nbsp;' + a.strip()} | {b} | {c} | {d} |"
              for a, b, c, d in rows(result)]
    lines += ["", "| target | measured | target | |", "|---|---|---|---|"]
    for t in result["targets"]:
        status = {True: "met", False: "**missed**", None: "n/a"}[t["met"]]
        lines.append(f"| {t['name']} | {_fmt(t['value'])} | {t['target']} | {status} |")
    if (result["results"].get("kwok_scale") or {}).get("runs"):
        lines += kwok_markdown(result["results"]["kwok_scale"])
    m, rev = result["machine"], result.get("revision") or {}
    lines += ["", f"Commit {rev.get('commit')}"
                  + (f" with uncommitted changes to {', '.join(rev['uncommitted'])}" if rev.get("uncommitted") else "")
                  + ".", "", f"Machine: {m['cpu']}, {m['cpus']} CPUs, {m['memory_mib']} MiB, Linux {m['kernel']}, "
                  f"Python {m['python']}, jax/jaxlib {m['jax']}/{m['jaxlib']}. Run {result['date']} "
                  f"({result['mode']} mode, {result['duration_seconds']} s); load average (1/5/15 min) "
                  f"before {' / '.join(f'{x:.2f}' for x in m['loadavg_before'])}, "
                  f"after {' / '.join(f'{x:.2f}' for x in m['loadavg_after'])}."]
    return "\n".join(lines)
