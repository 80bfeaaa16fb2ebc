"""The recovery and goodput benchmarks' arithmetic on a real stopped and resumed run, their option
checks, and the tables of their committed reports (the real-node runs themselves are in
benchmarks/recovery.md, not here)."""

import json
import signal
import statistics
import subprocess
import sys
import time

import pytest

from benchmarks import goodput, recovery
from benchmarks.procs import read_report
from tests.support.paths import MNIST_DIR, REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(300)
def test_goodput_figures_of_a_stopped_and_resumed_run(tmp_path):
    """SIGTERM mid-run (the trainer saves that step and exits 143), then the same command again
    (it resumes there): two attempts, no step redone, a goodput between 0 and 1."""
    command = [sys.executable, "-m", "trainer", "train", "--data-dir", str(MNIST_DIR), "--no-download",
               "--epochs", "2", "--train-examples", "12800", "--log-every", "10", "--checkpoint-dir", str(tmp_path)]
    metrics = tmp_path / "jax-training" / "metrics.jsonl"
    applied = time.time()
    first = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 200
        while not any(r.get("event") == "step" and r["step"] >= 30 for r in records(metrics)):
            assert time.monotonic() < deadline and first.poll() is None, records(metrics)
            time.sleep(0.1)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 143
    finally:
        first.kill()
    stopped = next(r["step"] for r in records(metrics) if r.get("event") == "preempted")
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    figures = goodput.goodput_figures(records(metrics), applied, [1.0])
    assert figures["total_steps"] == 200 and figures["restarts"] == 1
    assert figures["resumed_from"] == [stopped] and figures["steps_redone"] == [0]
    assert 0 < figures["goodput_from_apply"] < figures["goodput"] < 1
    assert figures["productive_seconds"] == round(200 * figures["step_seconds"], 1)


@pytest.mark.parametrize("module, args, option", [
    ("benchmarks.recovery", ["--targets", "indexed-job,slurm"], "--targets"),
    ("benchmarks.recovery", ["--faults", "pod-evicted"], "--faults"),
    ("benchmarks.recovery", ["--repeats", "0"], "--repeats"),
    ("benchmarks.goodput", ["--target", "slurm"], "--target"),
    ("benchmarks.goodput", ["--every", "0"], "--every"),
    ("benchmarks.goodput", ["--repeats", "0"], "--repeats"),
    # a report to print that is not there or not a report: argparse's one line, as every module reads it
    ("benchmarks", ["--markdown", "no-such-report.json"], "--markdown: cannot read no-such-report.json"),
    ("benchmarks.recovery", ["--markdown", "README.md"], "--markdown: README.md: not a saved report"),
    ("benchmarks.goodput", ["--markdown", "benchmarks/recovery-hosts.png"], "not a saved report"),
    ("benchmarks.node_loss", ["--markdown", "benchmarks"], "--markdown: cannot read benchmarks: Is a directory"),
    ("benchmarks.recovery", ["--markdown", "benchmarks/results/recovery-fast-join.json.gz", "--plot", "x.png",
                             "--plot-also", "no-such-report.json"], "--plot-also: cannot read no-such-report.json"),
    # another benchmark's report: refused by what every report of the module holds, not a KeyError
    ("benchmarks.recovery", ["--markdown", "benchmarks/results/goodput.json.gz"],
     "--markdown: benchmarks/results/goodput.json.gz: not a report of benchmarks.recovery (it has no 'victim_rank')"),
    ("benchmarks.recovery", ["--markdown", "benchmarks/results/recovery-fast-join.json.gz", "--plot", "x.png",
                             "--plot-also", "benchmarks/results/node-loss.json.gz"],
     "not a report of benchmarks.recovery"),
    ("benchmarks.goodput", ["--markdown", "benchmarks/results/recovery-cache.json.gz"],
     "not a report of benchmarks.goodput"),
    ("benchmarks.node_loss", ["--markdown", "benchmarks/results/goodput.json.gz"],
     "not a report of benchmarks.node_loss"),
    ("benchmarks.slurm_requeue", ["--markdown", "benchmarks/results/node-loss.json.gz"],
     "not a report of benchmarks.slurm_requeue"),
    ("benchmarks", ["--markdown", "benchmarks/results/slurm-requeue.json.gz"], "not a report of benchmarks (it has no"),
])
def test_bad_options_are_one_line_and_nothing_starts(module, args, option):
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["recovery-operators.json.gz", "recovery-late.json.gz", "recovery-hosts.json.gz",
                                  "recovery-first-step.json.gz", "recovery-fast-join.json.gz",
                                  "recovery-indexed-job-8h.json.gz", "recovery-hosts-both.json.gz",
                                  "recovery-indexed-job-4h.json.gz", "recovery-jobset-killed-8h.json.gz",
                                  "recovery-jaxjob-coord-service.json.gz", "recovery-peer-lost-wait.json.gz",
                                  "recovery-controllers.json.gz"])
def test_the_committed_recovery_reports_make_their_tables(name):
    report = read_report(RESULTS / name)
    text = recovery.markdown(report)
    for key, result in report["results"].items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {key} | "))
        assert f"| {result['median']['first_step']:.2f} |" in row
        if key.endswith(" hosts"):  # the gang size the plot reads off a report of one host count
            assert {recovery.gang_size(run) for run in result["runs"]} == {int(key.split(" × ")[-1].split()[0])}
    assert set(report["phases"]) <= set(recovery.PHASES)  # (a report may predate a phase)


def test_the_controllers_marks_follow_the_victims_failure_and_the_survivors_deletion():
    """A JobSet's killed container as its pod watch sees it: the victim's pod turns Failed, a sync
    later the survivor is marked for deletion, then new pods come. A container restarted in place
    (no Failed phase, no deletion) leaves both marks unseen, not zero."""
    def pod(uid, rank, t, phase="Running", state="running", deleting=False, restarts=0):
        meta = {"uid": uid, "labels": {"batch.kubernetes.io/job-completion-index": str(rank)}}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-30T11:44:33Z"
        return (t, {"metadata": meta, "spec": {"nodeName": "node-1"},
                    "status": {"phase": phase, "containerStatuses": [{"state": {state: {}}, "restartCount": restarts}]}})
    old = [pod("a", 0, 0)[1], pod("b", 1, 0)[1]]
    watch = recovery.PodWatch.__new__(recovery.PodWatch)
    # z: an earlier fault's pod, failed and being deleted as the watch lists it: not this fault's moves
    watch.events = [pod("z", 1, 99.0, phase="Failed", state="terminated", deleting=True),
                    pod("a", 0, 100.0), pod("b", 1, 100.0), pod("b", 1, 100.1, state="terminated"),
                    pod("b", 1, 101.2, phase="Failed", state="terminated"), pod("a", 0, 102.1, deleting=True),
                    pod("a", 0, 102.3, phase="Failed", state="terminated", deleting=True),
                    pod("c", 0, 103.2), pod("d", 1, 103.25)]
    assert recovery.live_pod([watch.events[0][1], *old], "indexed-job", 1) is old[1]  # the fault's victim: b
    marks = recovery.PodWatch.marks(watch, 100.0, [*old, watch.events[0][1]], "indexed-job", victim_uid="b")
    assert {k: round(marks[k], 2) for k in ("victim_pod_failed", "survivors_told_to_stop", "old_containers_finished",
                                              "new_pods_created")} == {
        "victim_pod_failed": 1.2, "survivors_told_to_stop": 2.1, "old_containers_finished": 2.3,
        "new_pods_created": 3.25}
    watch.events = [pod("a", 0, 100.0), pod("b", 1, 100.0), pod("b", 1, 100.1, state="terminated"),
                    pod("b", 1, 100.9, restarts=1), pod("a", 0, 101.0, state="terminated"), pod("a", 0, 101.5, restarts=1)]
    marks = recovery.PodWatch.marks(watch, 100.0, old, "indexed-job", victim_uid="b")
    assert marks["victim_pod_failed"] is None and marks["survivors_told_to_stop"] is None
    assert marks["restarted_in_place"] == 2 and "victim_pod_failed" not in recovery.PodWatch.marks(watch, 100.0, old,
                                                                                                    "indexed-job")


def test_recovery_md_shows_the_first_step_reports_medians():
    """Its first table, cell by cell: pods created, containers running, first step, the slowest first
    step, and the median of each run's container running -> first step; then the previous run's
    first step and container -> first step. The controllers' table of the same report after it."""
    report = read_report(RESULTS / "recovery-controllers.json.gz")
    before = read_report(RESULTS / "recovery-fast-join.json.gz")
    text = (REPO_ROOT / "benchmarks" / "recovery.md").read_text()

    def gaps(result):
        return [round(run["first_step"] - run["new_containers_running"], 2) for run in result["runs"]]

    for key, result in report["results"].items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {key} | "))
        cells = [cell.replace("**", "").strip() for cell in row.split("|")[2:-1]]
        median, runs = result["median"], gaps(result)
        assert cells[:4] == [f"{median[k]:.2f}" for k in ("new_pods_created", "new_containers_running", "first_step")] \
            + [f"{result['max']['first_step']:.2f}"], row
        assert cells[5] == f"{statistics.median(runs):.2f} ({', '.join(f'{g:.2f}' for g in runs)})", row
        earlier = before["results"][key]
        assert cells[6] == f"{earlier['median']['first_step']:.2f}, {statistics.median(gaps(earlier)):.2f}", row
    for key in ("jobset × pod-deleted", "jobset × container-killed", "trainjob × pod-deleted",
                "trainjob × container-killed"):
        median = report["results"][key]["median"]
        columns = (*recovery.CONTROLLER_MARKS, "old_containers_finished", "new_pods_created")
        assert f"| {key} | " + " | ".join(f"{median[c]:.2f}" for c in columns) + " |" in text.splitlines(), key


@pytest.mark.parametrize("name", ["goodput.json.gz", "goodput-jobset-runs.json.gz", "goodput-trainjob-runs.json.gz",
                                  "goodput-jobset-fast.json.gz", "goodput-trainjob-fast.json.gz",
                                  "goodput-jobset-quiet.json.gz", "goodput-trainjob-quiet.json.gz",
                                  "goodput-trainjob-now.json.gz",
                                  "goodput-indexed-job-1.json.gz", "goodput-indexed-job-2.json.gz",
                                  "goodput-indexed-job-3.json.gz"])
def test_the_committed_goodput_report_follows_from_its_records(name):
    report = read_report(RESULTS / name)
    for run in goodput.runs_of(report):
        figures = goodput.goodput_figures(run["metrics_records"], 0.0, run["fault_times_seconds"])
        for key in ("total_steps", "step_seconds", "productive_seconds", "wall_seconds", "goodput", "restarts",
                    "steps_redone", "resumed_from"):
            assert figures[key] == run[key], key
        assert f"| {run['goodput']:.3f} |" in goodput.markdown(report)
    if "runs" in report:
        goodputs = [run["goodput"] for run in report["runs"]]
        assert report["goodput_min"] == min(goodputs) and report["goodput_median"] == statistics.median(goodputs)
    shown = subprocess.run([sys.executable, "-m", "benchmarks.goodput", "--markdown", str(RESULTS / name)],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout == goodput.markdown(report) + "\n", shown.stderr


def test_the_in_place_report_shows_one_new_pod_per_fault_whatever_the_gang():
    """The Indexed Job's committed in-place figures: every fault replaced one pod and restarted the
    other ranks in their pods, with 2 hosts and with 4; and the README stays one page of method and
    current tables."""
    report = read_report(RESULTS / "recovery-in-place.json.gz")
    for cell, result in report["results"].items():
        hosts = int(cell.rsplit("× ", 1)[1].split()[0])
        assert result["runs"] and not result["errors"], cell
        assert all(run["new_pods"] == 1 and run["restarted_in_place"] == hosts - 1 for run in result["runs"]), cell
    assert "| indexed-job × pod-deleted × 4 hosts |" in recovery.markdown(report)
    for page in ("README.md", "recovery.md", "node-loss.md"):  # each one page of method and current tables
        assert len((REPO_ROOT / "benchmarks" / page).read_text().splitlines()) <= 255, page


def test_the_host_growth_plot_draws_each_cell_over_its_host_counts(tmp_path):
    """`--markdown REPORT --plot PNG`: the first step's median per host count, a line per target × fault."""
    report = read_report(RESULTS / "recovery-in-place.json.gz")
    growth = recovery.host_growth(report)
    assert growth == {cell: {h: report["results"][f"{cell} × {h} hosts"]["median"]["first_step"] for h in (2, 4)}
                      for cell in ("indexed-job × pod-deleted", "indexed-job × container-killed")}
    # a report of one host count joins the others at its runs' count; a cell with one point draws no line
    eight = read_report(RESULTS / "recovery-indexed-job-8h.json.gz")
    assert recovery.host_growth(eight) == {}
    joined = recovery.host_growth(report, eight)
    assert joined["indexed-job × pod-deleted"] == {
        **growth["indexed-job × pod-deleted"], 8: eight["results"]["indexed-job × pod-deleted"]["median"]["first_step"]}
    png = tmp_path / "hosts.png"
    shown = subprocess.run([sys.executable, "-m", "benchmarks.recovery", "--markdown",
                            str(RESULTS / "recovery-in-place.json.gz"), "--plot", str(png)],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and shown.stdout == recovery.markdown(report) + "\n", shown.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    unwritable = subprocess.run([sys.executable, "-m", "benchmarks.recovery", "--markdown",
                                 str(RESULTS / "recovery-in-place.json.gz"), "--plot", str(tmp_path / "no" / "x.png")],
                                cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert unwritable.returncode == 2 and unwritable.stderr.splitlines()[-1].endswith(
        f"--plot: cannot write {tmp_path / 'no' / 'x.png'}: No such file or directory"), unwritable.stderr
    assert "Traceback" not in unwritable.stderr


def test_recovery_md_shows_the_goodput_runs_of_their_reports():
    text = (REPO_ROOT / "benchmarks" / "recovery.md").read_text()
    for target in ("jobset", "trainjob"):
        for name, label, median, least in (
                (f"goodput-{target}-fast.json.gz", target, "**{:.3f}**", "{:.3f}"),
                (f"goodput-{target}-runs.json.gz", f"{target}, before", "{:.3f}", "{:.3f}"),
                *([("goodput-jobset-quiet.json.gz", "jobset, quiet", "**{:.3f}**", "**{:.3f}**")]
                  if target == "jobset" else [("goodput-trainjob-quiet.json.gz", "trainjob, quiet", "{:.3f}", "{:.3f}"),
                                              ("goodput-trainjob-now.json.gz", "trainjob, now", "**{:.3f}**",
                                               "**{:.3f}**")])):
            report = read_report(RESULTS / name)
            runs = ", ".join(f"{run['goodput']:.3f}" for run in report["runs"])
            row = (f"| {label} | {runs} | {median.format(report['goodput_median'])} | "
                   f"{least.format(report['goodput_min'])} |")
            assert row in text, row


def test_recovery_md_shows_the_host_table_of_its_reports():
    """The 2/4/8-host table, cell by cell: 2 hosts from the 2-host report, 4 and 8 from the host run,
    the JobSet's killed container at 8 hosts from its own rerun, the Indexed Job's 4 and 8 hosts from
    theirs, the JAXJob's from its run with the coordinator Service; the 8-host phases; the earlier
    figures; the plot's points."""
    reports = [read_report(RESULTS / name) for name in
               ("recovery-hosts-both.json.gz", "recovery-fast-join.json.gz", "recovery-jobset-killed-8h.json.gz",
                "recovery-indexed-job-4h.json.gz", "recovery-indexed-job-8h.json.gz",
                "recovery-jaxjob-coord-service.json.gz", "recovery-controllers.json.gz")]
    growth = recovery.host_growth(*reports)
    before = read_report(RESULTS / "recovery-hosts.json.gz")["results"]  # the operators' pod-deleted only
    in_place = read_report(RESULTS / "recovery-in-place.json.gz")["results"]  # the Indexed Job's, 2 and 4 hosts
    text = (REPO_ROOT / "benchmarks" / "recovery.md").read_text()
    for target in ("jobset", "trainjob", "jaxjob", "indexed-job"):
        for fault in ("pod-deleted", "container-killed"):
            cell = f"{target} × {fault}"
            row = next(line for line in text.splitlines() if line.startswith(f"| {cell} | ") and line.count("/") == 5)
            cells = [c.replace("**", "").strip() for c in row.split("|")[2:-1]]
            assert cells[:3] == [f"{growth[cell][h]:.2f}" for h in (2, 4, 8)], row
            if target == "indexed-job":
                eight = reports[4]["results"][cell]
            elif target == "jaxjob":
                eight = reports[5]["results"][f"{cell} × 8 hosts"]
            elif cell == "jobset × container-killed":
                eight = reports[2]["results"][cell]
            else:
                eight = reports[0]["results"][f"{cell} × 8 hosts"]
            assert growth[cell][8] == eight["median"]["first_step"]
            phases = [eight["median"]["phases"][p] for p in ("replace", "container_start", "import_and_data",
                                                               "rendezvous", "restore", "to_first_step")]
            assert cells[4] == " / ".join(f"{p:.2f}" for p in phases), row
            if target == "indexed-job":
                earlier = f"{in_place[f'{cell} × 4 hosts']['median']['first_step']:.2f} (4 hosts, 651d8ad)"
            elif fault == "pod-deleted":
                earlier = ", ".join(f"{before[f'{cell} × {h} hosts']['median']['first_step']:.2f}" for h in (4, 8))
            else:
                earlier = ""
            assert cells[3] == earlier, row


def test_recovery_md_shows_make_bench_before_and_after_from_its_reports():
    """The undisturbed figures of `make bench` before and after the restart path's change, as the
    two committed reports' tables print them."""
    from benchmarks import report as bench_report

    def cells(name):
        rows = bench_report.markdown(read_report(RESULTS / name)).splitlines()
        return {row.split(" | ")[0].lstrip("| ").replace("&nbsp;", ""): row.split(" | ")[1] for row in rows
                if row.startswith("| ") and " | " in row}

    before, after = cells("make-bench-2b56838.json.gz"), cells("make-bench-c3a1b2b.json.gz")
    text = " ".join((REPO_ROOT / "benchmarks" / "recovery.md").read_text().split())
    for label in ("images/s per epoch after compile (1x1)", "epoch seconds 1x1", "epoch seconds 2x1",
                  "start -> 98.0% test accuracy, 1 process", "start -> first step done, 2 processes",
                  "same, warm compilation cache"):
        assert f"{before[label]} → {after[label]}" in text, label


def test_recovery_md_shows_the_jaxjob_meeting_through_its_coordinator_service():
    """The JAXJob's deleted pod at 2 hosts since the render's coordinator Service, as its report has
    it: container -> first step (median and runs), the first step after the fault, the rendezvous;
    and every process of every run took the Service's address from JAX_COORDINATOR_ADDRESS."""
    report = read_report(RESULTS / "recovery-jaxjob-coord-service.json.gz")
    result = report["results"]["jaxjob × pod-deleted × 2 hosts"]
    gaps = [round(run["first_step"] - run["new_containers_running"], 2) for run in result["runs"]]
    text = " ".join((REPO_ROOT / "benchmarks" / "recovery.md").read_text().split())
    assert f"then met at **{statistics.median(gaps):.2f} s** ({', '.join(f'{g:.2f}' for g in gaps)})" in text
    assert f"first step **{result['median']['first_step']:.2f} s** after the fault" in text
    assert f"rendezvous 4.12 → {result['median']['phases']['rendezvous']:.2f} s" in text
    for cell in report["results"].values():
        for run in cell["runs"]:
            lines = [line for logs in run["start_logs"].values() for line in logs if ": cluster: process " in line]
            assert len(lines) == recovery.gang_size(run) and all(
                "-coord:" in line and "coordinator_address: JAX_COORDINATOR_ADDRESS" in line for line in lines)


def test_recovery_md_and_the_failure_page_show_a_crash_with_the_lost_peers_wait():
    """A killed container of a JobSet and a TrainJob since a lost peer's wait, as its report has it: the
    first step after the fault, the terminate phase, container -> first step; and the fast-join run's
    figures it is compared with, there and in docs/kubernetes.md."""
    report = read_report(RESULTS / "recovery-peer-lost-wait.json.gz")["results"]
    before = read_report(RESULTS / "recovery-fast-join.json.gz")["results"]
    text = " ".join((REPO_ROOT / "benchmarks" / "recovery.md").read_text().split())
    page = " ".join((REPO_ROOT / "docs" / "kubernetes.md").read_text().split())
    jobset, trainjob = (report[f"{t} × container-killed"] for t in ("jobset", "trainjob"))
    then = [before[f"{t} × container-killed"]["median"]["first_step"] for t in ("jobset", "trainjob")]
    assert (f"first step {jobset['median']['first_step']:.2f} s (JobSet) and {trainjob['median']['first_step']:.2f} s"
            f" (TrainJob) after the fault, {then[0]:.2f} and {then[1]:.2f} in the fast-join run") in text
    assert (f"terminate {jobset['median']['phases']['terminate']:.2f} and "
            f"{trainjob['median']['phases']['terminate']:.2f} s") in text

    def gap(result):
        return statistics.median(run["first_step"] - run["new_containers_running"] for run in result["runs"])
    assert f"container → first step {gap(jobset):.2f} and {gap(trainjob):.2f} s" in text
    assert (f"JobSet {then[0]:.2f} → {jobset['median']['first_step']:.2f} s, TrainJob {then[1]:.2f} → "
            f"{trainjob['median']['first_step']:.2f} s") in page


def test_recovery_md_shows_the_indexed_jobs_three_goodput_runs():
    """The Indexed Job's goodput under a deletion every 120 s, one run per report: each run, the
    median and the minimum, the restarts' seconds lost and the backoff's share of them."""
    runs = [goodput.runs_of(read_report(RESULTS / f"goodput-indexed-job-{n}.json.gz"))[0] for n in (1, 2, 3)]
    values = [run["goodput"] for run in runs]
    text = " ".join((REPO_ROOT / "benchmarks" / "recovery.md").read_text().split())
    assert (f"goodput **{values[0]:.3f}, {values[1]:.3f} and {values[2]:.3f}**, median "
            f"**{statistics.median(values):.3f}**, minimum {min(values):.3f}") in text
    lost = sum(runs[2]["lost_per_restart_seconds"])
    assert round(lost) == 73 and f"70 of {round(lost)} s in the third ({round(70 / lost * 100)} %" in text

