"""Recovery on real pods: seconds from a fault to the first resumed training step, phase by phase.

    python -m benchmarks.recovery [--targets indexed-job,jobset] [--faults pod-deleted,container-killed]
                                  [--repeats N] [--output FILE]
    python -m benchmarks.recovery --markdown FILE   (the table of a saved report)

Needs root and `scripts/setup.sh cluster node`. Takes the host's cluster lock
(/tmp/jaxt-cluster.lock, as `flock` does) for the whole run, starts one control plane with one real
node (scripts/cluster/up.sh --real-node), and for each target × fault × repeat runs the 2-host CPU
job of variables/examples/cpu-local.json (MNIST on a node volume, the outputs on a claim, a
progress record every 10 steps), injects the fault past step 150 and stops the job once it has
logged a step after resuming. Faults:

- pod-deleted:      `kubectl delete pod` of rank 1 (default grace period): SIGTERM, every process
                    saves the same step and exits 143 (preempted);
- container-killed: SIGKILL of rank 1's container through containerd (`ctr tasks kill`): it exits
                    137, rank 0 loses its peer and exits 141 (peer-lost); the run resumes from the
                    last periodic checkpoint (every 100 steps here).

Marks (seconds after the fault), each the slowest pod's where there are several:
- pod side, from a `kubectl get pods --watch` stream (arrival times: the API's own timestamps have
  1 s resolution): every old container terminated, every replacement pod created, scheduled,
  its container running; between them the controllers' moves (CONTROLLER_MARKS): the victim's pod
  Failed, the first of the other pods marked for deletion;
- trainer side, rank 0's `preempted` metrics record (the stop's checkpoint written); then from the
  new rank 0's log (`kubectl logs --timestamps`: the runtime stamps each line
  as it is written) and the metrics records on the outputs volume (their own `time`): the first
  log line (Python and the trainer imported), the compilation cache line (jax imported, MNIST read),
  the device line (jax.distributed joined by every process, backend up), the restore line, the
  `start` record (state on the devices), the attempt's `first_step` record (its first step done,
  with the compile or cache load; a trainer before it has none: then its first `step` record, with
  up to 10 steps in it) and its first `step` record (`first_record`).

The JSON report goes to stdout (and --output); medians over repeats per target × fault.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from benchmarks.cli import report_options, report_type, stamp
from benchmarks.procs import MNIST_DIR, REPO_ROOT, publish, write_report
from generator.targets import KUBERNETES as TARGETS, workload

SCRIPTS = REPO_ROOT / "scripts"
NAMESPACE = "jax-bench"
LOCK = "/tmp/jaxt-cluster.lock"
FAULTS = ("pod-deleted", "container-killed")
REPORT_KEYS = ("victim_rank", "phases", "results")  # what every report of this benchmark holds
FAULT_AFTER_STEP = 150
LOG_EVERY = 10
# The variables every run here uses (as tests/e2e_k8s's real tier): 2 hosts × 1 CPU device, one
# epoch, MNIST on the node volume `mnist`, the outputs on a claim backed by the node's disk. Requests
# that 8 hosts fit on the node's 2 CPUs, and one cpu limit for every target: a TrainJob's limits
# without one take its request (the Kubeflow SDK reads the device from them) and throttle it.
# backoff_limit 1 (jobset.max_restarts 1 for a JobSet and the TrainJob's): a SIGKILLed process
# counts against it. (With a JobSet's default of 0 a killed container restarted the job only when a
# peer's peer-lost exit, which restarts it uncounted, reached the Job controller first.)
SETS = ["training.epochs=1", f"training.log_every={LOG_EVERY}", "data.download=false", "backoff_limit=1",
        "jobset.max_restarts=1",
        "checkpoint.every_steps=100", "persistence.enabled=true", "image.pull_policy=Never"]
SET_JSON = ['data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}',
            'persistence.storage_class="-"',
            'resources={"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "3Gi"}}']
# A TrainJob runs on its own TrainingRuntime: the project's failure policy (the default runtime's
# is the Trainer's).
TARGET_SETS = {"trainjob": ["trainjob.own_runtime=true"]}
# Rank 0's log lines that mark the trainer's start-up, in order (trainer/train.py, trainer/runtime.py).
TRAINER_MARKS = {
    "process_first_log": "cluster: ",
    "jax_imported_data_loaded": "compilation cache: ",
    "distributed_initialised": "global devices",
    "restored": "resuming from the checkpoint",
}
# What bounds each phase (README's recovery table repeats it).
PHASES = {
    "stop_and_save": ("fault", "stop_saved", "the signal's delivery, the current chunk of steps (up to "
                      f"{LOG_EVERY} here), the agreement, the checkpoint write (pod-deleted only)"),
    "terminate": ("fault", "old_containers_finished",
                  "the stop and save, the process exit, the kubelet's report (its PLEG relists every "
                  "second); for SIGKILL the survivor's peer-lost exit"),
    "replace": ("old_containers_finished", "new_pods_created",
                "the controllers: the Job controller's syncs (pod events 1 s batched; podReplacementPolicy "
                "Failed waits for terminal pods), a JobSet's or operator's recreation (CONTROLLER_MARKS)"),
    "schedule": ("new_pods_created", "new_pods_scheduled", "kube-scheduler"),
    "container_start": ("new_pods_scheduled", "new_containers_running", "kubelet: sandbox, CNI, runc"),
    "python_start": ("new_containers_running", "process_first_log", "interpreter and trainer imports"),
    "import_and_data": ("process_first_log", "jax_imported_data_loaded", "import jax ∥ read MNIST"),
    "rendezvous": ("jax_imported_data_loaded", "distributed_initialised",
                   "the slowest process to join the coordinator; backend creation"),
    "restore": ("distributed_initialised", "restored", "checkpoint read by rank 0 and broadcast"),
    "to_first_step": ("restored", "first_step",
                      "state to devices, compile (or compilation cache), the first step"),
}

# The controllers' moves between the fault and the new pods (pod-side marks too; a run records them
# where its pods show them: a container restarted in place leaves its pod running, a lone pod has no
# survivors). `--markdown` prints them with the two marks around them.
CONTROLLER_MARKS = {
    "victim_pod_failed": "the kubelet reports the victim's pod Failed: its phase turns terminal once its "
                         "containers and sandbox are stopped",
    "survivors_told_to_stop": "a controller marks another pod of the gang for deletion, running or "
                              "already ended by itself (a stop's 143): the Job controller's first sync to "
                              "see the failure (it syncs pod events 1 s after the first), or the operator's",
}


def log(message: str) -> None:
    print(f"[benchmarks.recovery] {message}", file=sys.stderr, flush=True)


@contextmanager
def cluster_lock():
    """The host-wide lock every real-node cluster is started under (one real node per host)."""
    with open(LOCK, "a") as handle:
        log(f"waiting for {LOCK}")
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run(args: list, env: dict, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def rank_of(pod: dict, target: str) -> int | None:
    index = pod["metadata"].get("labels", {}).get(workload(target).index_label)
    return int(index) if index is not None else None


class PodWatch:
    """`kubectl get pods --watch -o json` in a thread: the arrival time of every version of every pod."""

    def __init__(self, env: dict, selector: str):
        self.events: list[tuple[float, dict]] = []
        self.proc = subprocess.Popen(["kubectl", "-n", NAMESPACE, "get", "pods", "-l", selector, "--watch",
                                      "-o", "json"], env=env, stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.proc.stdout:
            buffer += line
            try:
                obj, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                continue
            self.events.append((time.time(), obj))
            buffer = buffer.lstrip()[end:]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def marks(self, fault: float, old_pods: list[dict], target: str, victim_uid: str = "") -> dict:
        """Arrival times of the pod-side marks (the slowest pod's or rank's), None where one was not
        seen. A rank's container comes back in a new pod or, restarted in place (container restart
        rules), in its old one: its restart count goes up. With the victim's pod UID, also the
        controllers' two first moves (CONTROLLER_MARKS)."""
        restarts_at_fault = {p["metadata"]["uid"]: _restart_count(p) for p in old_pods}
        first: dict[tuple[str, str], float] = {}
        ranks: dict[str, int | None] = {}
        for arrived, pod in self.events:
            uid = pod["metadata"]["uid"]
            ranks[uid] = rank_of(pod, target)
            states = [s.get("state", {}) for s in pod["status"].get("containerStatuses", [])]
            restarted = uid in restarts_at_fault and _restart_count(pod) > restarts_at_fault[uid]
            seen = {"exists": True,
                    "scheduled": bool(pod["spec"].get("nodeName")),
                    "running": any("running" in s for s in states) and (uid not in restarts_at_fault or restarted),
                    "terminated": any("terminated" in s for s in states) or restarted
                    or pod["status"].get("phase") in ("Failed", "Succeeded"),
                    # (the watch lists the pods before the fault: a pod that had already failed is not this one)
                    "failed": arrived > fault and pod["status"].get("phase") == "Failed",
                    "deleting": arrived > fault and bool(pod["metadata"].get("deletionTimestamp"))}
            for what, true in seen.items():
                if true:
                    first.setdefault((uid, what), arrived)
        new = {uid for uid, _ in first} - set(restarts_at_fault)
        in_place = {uid for uid in restarts_at_fault if (uid, "running") in first}

        def slowest(uids, what):
            times = [first.get((uid, what)) for uid in uids]
            return None if not times or None in times else max(times) - fault

        def every_rank_running():  # each rank's first container after the fault, new pod or in place
            by_rank: dict[int | None, float] = {}
            for uid in new | in_place:
                if (uid, "running") in first:
                    by_rank[ranks[uid]] = min(by_rank.get(ranks[uid], float("inf")), first[(uid, "running")])
            wanted = {rank_of(p, target) for p in old_pods}
            return max(by_rank.values()) - fault if wanted <= set(by_rank) else None
        def earliest(uids, what):
            times = [first[(uid, what)] for uid in uids if (uid, what) in first]
            return min(times) - fault if times else None

        survivors = set(restarts_at_fault) - {victim_uid}
        controllers = {"victim_pod_failed": earliest({victim_uid}, "failed"),
                       "survivors_told_to_stop": earliest(survivors, "deleting")} if victim_uid else {}
        return {**controllers, "old_containers_finished": slowest(restarts_at_fault, "terminated"),
                "new_pods_created": slowest(new, "exists"),
                "new_pods_scheduled": slowest(new, "scheduled"),
                "new_containers_running": every_rank_running(),
                "new_pods": len(new), "restarted_in_place": len(in_place)}


def live_pod(pods: list[dict], target: str, rank: int) -> dict:
    """The pod of `rank` that runs: an earlier fault's failed pod may still be listed beside it."""
    return next(p for p in pods if rank_of(p, target) == rank and not p["metadata"].get("deletionTimestamp")
                and p["status"].get("phase") not in ("Failed", "Succeeded"))


def _restart_count(pod: dict) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))


def log_time(text: str) -> float:
    """An RFC 3339 timestamp with nanoseconds (kubectl logs --timestamps) as Unix seconds."""
    text = re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def records(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def wait_for(what: str, probe, timeout: float, job: subprocess.Popen, interval: float = 0.2):
    """Poll `probe` until it returns a truthy value; fail when run.sh has exited or after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.poll() is not None:
            said = getattr(job, "output", None)
            tail = " ".join(said.read_text(errors="replace").splitlines()[-3:]) if said and said.exists() else ""
            raise RuntimeError(f"scripts/run.sh exited {job.returncode} while waiting for {what}"
                               + (f"; it said: {tail[-600:]}" if tail else ""))
        result = probe()
        if result:
            return result
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Session:
    """One real-node control plane, MNIST on its volume, the trainer image imported."""

    def __init__(self, state: Path):
        self.state = state
        started = time.monotonic()
        out = run([SCRIPTS / "cluster" / "up.sh", "--real-node", "--state-dir", state, "--namespace", NAMESPACE,
                   "--owner-pid", os.getpid(), "--max-lifetime", "1800"], os.environ, timeout=1800)
        self.up_seconds = round(time.monotonic() - started, 1)
        self.env = dict(os.environ, KUBECONFIG=out.strip().splitlines()[-1])
        run([SCRIPTS / "cluster" / "host-volume.sh", state, NAMESPACE, "mnist", MNIST_DIR], self.env, 180)
        self.image = run([SCRIPTS / "image.sh"], self.env, timeout=1800).strip()

    def kubectl(self, *args, check: bool = True) -> str:
        return run(["kubectl", "-n", NAMESPACE, *args], self.env, 60, check)

    def pods(self, name: str, target: str) -> list[dict]:
        selector = workload(target).pod_selector.format(name=name)
        return json.loads(self.kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]

    def prepare(self, name: str, target: str, build: Path, extra_sets: tuple = ()) -> Path:
        """The build folder of `name`; returns the outputs directory on the node's disk."""
        volume = Path(run([SCRIPTS / "cluster" / "host-volume.sh", "--no-claim", self.state, NAMESPACE,
                           f"{name}-outputs"], self.env, 180).strip())
        repository = self.image.rsplit(":", 1)[0]
        args = [SCRIPTS / "prepare.sh", REPO_ROOT / "variables" / "examples" / "cpu-local.json", "-o", build,
                "--target", target, "--set", f"name={name}", "--set", f"namespace={NAMESPACE}",
                "--set", f"image.repository={repository}"]
        for s in [*SETS, *TARGET_SETS.get(target, []), *extra_sets]:
            args += ["--set", s]
        for s in SET_JSON:
            args += ["--set-json", s]
        run(args, self.env, 120)
        return volume / name

    def start(self, build: Path, timeout: int = 900) -> subprocess.Popen:
        """run.sh of the job in `build`, which gives up after `timeout` s (exit 124); its output goes
        to `job.output`, whose last lines a run's error quotes."""
        output = build.parent / f"{build.name}.run.log"
        with output.open("wb") as sink:
            job = subprocess.Popen([str(SCRIPTS / "run.sh"), "--no-logs", "--timeout", str(timeout), str(build)],
                                   env=self.env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        job.output = output
        return job

    def clean(self, build: Path, job: subprocess.Popen) -> None:
        if job.poll() is None:
            os.killpg(job.pid, 9)
            job.wait(timeout=10)
        # clean.sh gives up (and says what was left) before this process stops waiting for it.
        run([SCRIPTS / "clean.sh", "--delete-outputs", "--timeout", "240", build], self.env, 300, check=False)

    def fault(self, kind: str, victim: dict) -> None:
        name = victim["metadata"]["name"]
        if kind == "pod-deleted":
            self.kubectl("delete", "pod", name, "--wait=false")
        elif kind == "container-killed":
            run([*containerd_cli(), "tasks", "kill", "-s", "SIGKILL", container_id(victim)], self.env, 30)
        else:
            raise ValueError(kind)

    def rank0_log(self, pod: str, target: str) -> list[tuple[float, str]]:
        out = self.kubectl("logs", pod, "-c", workload(target).container, "--timestamps", check=False)
        lines = []
        for line in out.splitlines():
            when, _, text = line.partition(" ")
            try:
                lines.append((log_time(when), text))
            except ValueError:
                continue
        return lines


def containerd_cli() -> list[str]:
    socket = next(line.split("=", 1)[1] for line in (SCRIPTS / "cluster" / "node.env").read_text().splitlines()
                  if line.startswith("CONTAINERD_SOCKET="))
    return ["ctr", "--address", socket, "-n", "k8s.io"]


def container_id(pod: dict) -> str:
    """The containerd id of the pod's (only) running container, from its status."""
    for status in pod["status"].get("containerStatuses", []):
        if "running" in status.get("state", {}):
            return status["containerID"].split("://", 1)[1]
    raise RuntimeError(f"{pod['metadata']['name']} has no running container")


def recovery_run(session: Session, target: str, fault: str, repeat: int, tmp: Path, victim_rank: int = 1,
                 earlier: int = 0, after_step: int = FAULT_AFTER_STEP, epochs: int = 1, hosts: int = 2) -> dict:
    """The marks of one fault; with `earlier`, of the fault after that many earlier ones (each once
    the run has logged FAULT_AFTER_STEP steps past its last start)."""
    name = f"rec-{target}-{fault.split('-')[0]}-{hosts}h-{repeat}"[:40]
    build = tmp / name
    outputs = session.prepare(name, target, build, (f"training.epochs={epochs}", f"hosts_count={hosts}"))
    metrics_path = outputs / "metrics.jsonl"
    job = session.start(build)
    try:
        for round_ in range(earlier + 1):
            def far_enough():
                recs = records(metrics_path)
                starts = [r["step"] for r in recs if r.get("event") == "start"]
                return len(starts) == round_ + 1 and any(
                    r.get("event") == "step" and r["step"] >= starts[-1] + after_step for r in recs)
            wait_for(f"{name}: training {after_step} steps past its start {round_ + 1}", far_enough, 900, job)
            if round_ < earlier:
                pods = session.pods(name, target)
                session.fault(fault, live_pod(pods, target, victim_rank))
                log(f"{name}: earlier {fault} {round_ + 1}")
        pods = session.pods(name, target)
        victim = live_pod(pods, target, victim_rank)
        watch = PodWatch(session.env, workload(target).pod_selector.format(name=name))
        time.sleep(1.0)  # the watch has listed the pods as they are
        fault_time = time.time()
        session.fault(fault, victim)
        log(f"{name}: {fault} ({victim['metadata']['name']})")

        def resumed_step():
            after = [r for r in records(metrics_path) if r["time"] > fault_time]
            start = next((r for r in after if r.get("event") == "start"), None)
            return start and next((r for r in after if r.get("event") == "step" and r["time"] > start["time"]), None)
        try:
            first = wait_for(f"{name}: a training step after the resume", resumed_step, 240, job)
        finally:
            watch.stop()
        after = [r for r in records(metrics_path) if r["time"] > fault_time]
        start = next(r for r in after if r.get("event") == "start")
        # rank 0 now: a new pod, or its old one where its container restarted in place
        old_uids = {q["metadata"]["uid"] for q in pods}
        now = session.pods(name, target)
        rank0 = min((p for p in now if rank_of(p, target) == 0), key=lambda p: p["metadata"]["uid"] in old_uids)
        lines = [(t, text) for t, text in session.rank0_log(rank0["metadata"]["name"], target) if t > fault_time]
        new_pods = [p for p in now if p["metadata"]["uid"] not in old_uids]
        # every new pod's first log lines, seconds after the fault (to read where a slow phase waited)
        start_logs = {p["metadata"]["name"]: [f"{t - fault_time:7.2f} {text}" for t, text in
                                              session.rank0_log(p["metadata"]["name"], target)[:12]]
                      for p in new_pods}
        marks = {"fault": 0.0, **watch.marks(fault_time, pods, target, victim["metadata"]["uid"])}
        for key, marker in TRAINER_MARKS.items():
            marks[key] = next((t - fault_time for t, text in lines if marker in text), None)
        stopped = next((r for r in records(metrics_path) if r.get("event") == "preempted" and r["time"] > fault_time),
                       None)  # rank 0's record after the stop's save (pod-deleted only)
        marks["stop_saved"] = stopped["time"] - fault_time if stopped else None
        marks["start_record"] = start["time"] - fault_time
        first_step = next((r for r in after if r.get("event") == "first_step" and r["time"] >= start["time"]), first)
        marks["first_step"] = first_step["time"] - fault_time
        marks["first_record"] = first["time"] - fault_time
        before = [r["step"] for r in records(metrics_path) if r.get("event") == "step" and r["time"] <= fault_time]
        figures = {key: round(value, 2) if isinstance(value, float) else value for key, value in marks.items()}
        # The steps done after the last record before the fault are unknown (up to LOG_EVERY - 1).
        figures.update({"resumed_step": start["step"], "last_step_logged_before": max(before),
                        "steps_redone": max(0, max(before) - start["step"]), "first_step_record_step": first["step"]})
        figures["phases"] = phases(marks)
        figures["start_logs"] = start_logs
    finally:
        session.clean(build, job)
    log(f"{name}: {figures}")
    return figures


def phases(marks: dict, table: dict = PHASES) -> dict:
    """The seconds of each phase of `table` (from mark, to mark, why) whose two marks were seen."""
    out = {}
    for phase, (begin, end, _) in table.items():
        if marks.get(begin) is not None and marks.get(end) is not None:
            out[phase] = round(marks[end] - marks[begin], 2)
    return out


def summarize(runs: list[dict], pick=statistics.median, table: dict = PHASES) -> dict:
    """Medians (or `pick`) over repeats of every mark and phase (of `table`)."""
    def agg(values):
        values = [v for v in values if v is not None]
        return round(pick(values), 2) if values else None
    keys = list(dict.fromkeys(k for r in runs for k, v in r.items() if isinstance(v, (int, float))))  # (a mark
    # one run did not see is None there)
    summary = {k: agg([r.get(k) for r in runs]) for k in keys}
    summary["phases"] = {p: agg([r["phases"].get(p) for r in runs]) for p in table}
    return summary


def summarize_max(runs: list[dict]) -> dict:
    """The slowest repeat of every mark and phase."""
    return summarize(runs, max)


MARK_COLUMNS = ("old_containers_finished", "new_pods_created", "new_containers_running", "process_first_log",
                "distributed_initialised", "restored", "first_step")


def markdown(report: dict) -> str:
    """The recovery table of a saved report: per target × fault, the marks (seconds after the fault)
    and the phases between them."""
    def cell(value):
        return "" if value is None else f"{value:.2f}"
    lines = ["| target × fault | " + " | ".join(MARK_COLUMNS) + " | first_step, slowest | resumed at step (redone) |",
             "|---|" + "---|" * (len(MARK_COLUMNS) + 2)]
    phase_lines = ["| target × fault | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    controller_columns = (*CONTROLLER_MARKS, "old_containers_finished", "new_pods_created")
    controller_lines = ["| target × fault | " + " | ".join(controller_columns) + " |",
                        "|---|" + "---|" * len(controller_columns)]
    for key, result in report["results"].items():
        m = result["median"]
        if not m:
            lines.append(f"| {key} | failed: {result['errors'][0][:120]} |")
            continue
        slowest = (result.get("max") or {}).get("first_step")
        lines.append(f"| {key} | " + " | ".join(cell(m.get(c)) for c in MARK_COLUMNS)
                     + f" | {cell(slowest)} | {m['resumed_step']} ({m['steps_redone']}) |")
        phase_lines.append(f"| {key} | " + " | ".join(cell(m["phases"].get(p)) for p in PHASES) + " |")
        if any(m.get(c) is not None for c in CONTROLLER_MARKS):  # (reports before them have none)
            controller_lines.append(f"| {key} | " + " | ".join(cell(m.get(c)) for c in controller_columns) + " |")
    controllers = [*controller_lines, ""] if len(controller_lines) > 2 else []
    rev = report.get("revision") or {}
    load = report["load_average_before_after"]
    return "\n".join([*lines, "", *phase_lines, "", *controllers,
                      f"Commit {rev.get('commit')}, {report.get('date')}, {report['cpus']} CPUs, median of "
                      f"{report['repeats']}; load average {load[0][0]:.2f} before, {load[1][0]:.2f} after."])


def gang_size(run: dict) -> int:
    """The hosts of a measured run: the pods its fault replaced and the processes restarted in theirs."""
    return run["new_pods"] + (run.get("restarted_in_place") or 0)


def host_growth(*reports: dict) -> dict[str, dict[int, float]]:
    """{target × fault: {hosts: median seconds to the first step}} of one or more reports (a report
    measured at one host count names none in its cells: its runs' gang size is theirs); a later
    report's cell replaces an earlier one's at the same host count."""
    growth: dict[str, dict[int, float]] = {}
    for report in reports:
        for key, result in report["results"].items():
            if not result["median"]:
                continue
            cell, _, hosts = key.rpartition(" × ")
            if hosts.endswith(" hosts"):
                count = int(hosts.split()[0])
            else:
                cell, count = key, gang_size(result["runs"][0])
            growth.setdefault(cell, {})[count] = result["median"]["first_step"]
    return {cell: points for cell, points in growth.items() if len(points) > 1}


def plot_host_growth(reports: list[dict], path: str) -> None:
    """A small PNG: seconds from the fault to the first step against the gang's host count, a line per
    cell measured at more than one."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    growth = host_growth(*reports)
    figure, axes = pyplot.subplots(figsize=(6.5, 3), dpi=100)
    for cell, points in sorted(growth.items()):
        hosts = sorted(points)
        axes.plot(hosts, [points[h] for h in hosts], marker="o", label=cell)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted({h for points in growth.values() for h in points}))
    axes.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axes.set_xlabel("hosts (pods of the gang)")
    axes.set_ylabel("s, fault → first step")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))  # beside the lines, not over them
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="indexed-job,jobset", help=f"comma-separated, of {', '.join(TARGETS)}")
    parser.add_argument("--faults", default="pod-deleted", help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--victim-rank", type=int, choices=(0, 1), default=1,
                        help="the rank whose pod is deleted or container killed (0: the coordinator's)")
    parser.add_argument("--after-step", type=int, default=FAULT_AFTER_STEP, help="inject once this step is logged")
    parser.add_argument("--epochs", type=int, default=1, help="the job's epochs (468 steps each)")
    parser.add_argument("--hosts", default="2", help="comma-separated host counts (pods of the gang), each measured")
    parser.add_argument("--earlier-faults", type=int, default=0, metavar="N",
                        help="measure the fault that follows N earlier ones of the same kind in the same job")
    report_options(parser, *REPORT_KEYS)
    parser.add_argument("--plot", metavar="PNG", help="with --markdown: also draw the first step against the host "
                        "count, a line per target × fault")
    parser.add_argument("--plot-also", metavar="REPORT", action="append", default=[],
                        type=report_type(parser, *REPORT_KEYS),
                        help="with --plot: also draw this report's cells (e.g. the same cells at another host count)")
    args = parser.parse_args(argv)
    if args.markdown:
        report = args.markdown
        print(markdown(report))
        if args.plot:
            try:
                plot_host_growth([report, *args.plot_also], args.plot)
            except OSError as error:
                parser.error(f"--plot: cannot write {args.plot}: {error.strerror}")
        return 0
    targets, faults = args.targets.split(","), args.faults.split(",")
    for value, known, option in ((targets, TARGETS, "--targets"), (faults, FAULTS, "--faults")):
        if not set(value) <= set(known):
            parser.error(f"{option}: {', '.join(sorted(set(value) - set(known)))} not one of {', '.join(known)}")
    try:
        host_counts = [int(h) for h in args.hosts.split(",")]
    except ValueError:
        parser.error(f"--hosts: {args.hosts!r} is not a comma-separated list of integers")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    report: dict = {"after_step": args.after_step, "epochs": args.epochs, "victim_rank": args.victim_rank, "earlier_faults": args.earlier_faults, **stamp(),
                    "repeats": args.repeats, "fault_after_step": FAULT_AFTER_STEP, "log_every": LOG_EVERY,
                    "phases": {p: {"from": b, "to": e, "bounded_by": why} for p, (b, e, why) in PHASES.items()},
                    "controller_marks": CONTROLLER_MARKS,
                    "cpus": os.cpu_count(), "results": {}}
    with cluster_lock(), tempfile.TemporaryDirectory(prefix="jaxt-bench-recovery.") as tmp:
        state = Path(tmp) / "cluster"
        try:
            session = Session(state)
            report["node_tier_up_seconds"] = session.up_seconds
            for target, fault, hosts in itertools.product(targets, faults, host_counts):
                runs, errors = [], []
                for i in range(args.repeats):
                    try:
                        runs.append(recovery_run(session, target, fault, i, Path(tmp), args.victim_rank,
                                                 args.earlier_faults, args.after_step, args.epochs, hosts))
                    except (RuntimeError, subprocess.SubprocessError) as e:  # one run's failure: the others still run
                        log(f"{target} × {fault}: {e}")
                        errors.append(str(e)[:2000])
                cell = f"{target} × {fault}" + (f" × {hosts} hosts" if len(host_counts) > 1 else "")
                report["results"][cell] = {"runs": runs, "median": summarize(runs) if runs else None,
                                           "max": summarize_max(runs) if runs else None, "errors": errors}
                if args.output:  # what a run stopped early has measured so far
                    write_report(args.output, json.dumps(report, indent=2, ensure_ascii=False))
        finally:
            subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], capture_output=True, timeout=300)
    publish(report, load_before, args.output, lambda r: json.dumps(r, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
