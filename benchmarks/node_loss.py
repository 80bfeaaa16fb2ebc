"""Node loss on two real nodes: seconds from a node's fault to the first training step after it, per
Kubernetes target, phase by phase, and what a person has to do where a target cannot go on alone.

    python -m benchmarks.node_loss [--targets indexed-job,jobset,trainjob,jaxjob] [--faults power-off,reboot,drain]
                                   [--victim-ranks 1,0] [--repeats N] [--output FILE]
    python -m benchmarks.node_loss --rounds power-off:1,power-off:0,reboot:1 ...   (just these rounds, in order)
    python -m benchmarks.node_loss --markdown FILE   (the tables of a saved report)

Needs root and `scripts/setup.sh cluster node`. Takes the host's cluster lock (as benchmarks.recovery)
for the whole run and starts one control plane with two real nodes and the controllers
(scripts/cluster/up.sh --real-nodes 2). Each round runs one 2-host CPU job per target at once (MNIST
on a host volume, the outputs on a claim both nodes mount, a checkpoint every CHECKPOINT_EVERY steps),
the victim rank of each on node 2 and the other on node 1 (a preferred pod affinity to two anchor
pods, one per node, labelled with the rank: matchLabelKeys of the target's index label). Every job
checkpoints, trains to AFTER_STEP and holds there (the trainer's hidden --hold-after-step: jobs
started in turn would otherwise end before the last one reaches it); once all are held the round
releases them, and once each has trained past it, takes node 2 away (scripts/cluster/node-fault.sh;
node 1 also runs the cluster DNS):

- power-off: its kubelet, containerd and containers SIGKILLed at once, never to return;
- reboot:    the same, and the node back REBOOT_SECONDS later;
- drain:     `kubectl drain` (evictions: each pod's graceful stop, which saves and exits 143).

A job that has not trained a step after the fault within --person-after seconds is stuck: the report
says so with `jaxgen status` at that moment, and the documented action is taken (the node tainted
`node.kubernetes.io/out-of-service`); its figures then run on from the fault, with the action's time
among the marks. Every job must then finish; its final test accuracy is compared with an undisturbed
run of the same settings (one local process: the batch order and the averaged gradients do not
depend on the process count).

Marks, seconds after the fault (arrival times of `kubectl get --watch` events): node 2 NotReady, its
NoExecute taint, the victim pod's eviction (deletion mark), the person's action, the victim pod gone,
every replacement pod created, scheduled and running (benchmarks.recovery's pod marks), and from
rank 0's log and the metrics records the rendezvous (the device line), the restore and the first step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks import recovery
from benchmarks.cli import report_options, stamp
from benchmarks.procs import MNIST_DIR, REPO_ROOT, publish, write_report
from benchmarks.recovery import PodWatch, Session, cluster_lock, rank_of, records, run
from generator.engines.kubernetes.policy import (
    NODE_LOST_EFFECT,
    NODE_LOST_TAINTS,
    OUT_OF_SERVICE_TAINT,
)
from generator.targets import KUBERNETES as TARGETS
from generator.targets import workload
from trainer.faults import HOLD_RELEASED, HOLD_SECONDS

SCRIPTS = REPO_ROOT / "scripts"
NAMESPACE = "jax-bench"
FAULTS = ("power-off", "reboot", "drain")
LOST_NODE = 2  # node 1 also runs the cluster DNS of both
REBOOT_SECONDS = 60
TRAIN_EXAMPLES = 19200  # 150 steps of 128
CHECKPOINT_EVERY = 40
AFTER_STEP = 45  # the fault once every job has logged this step (and checkpointed before it)
LOG_EVERY = 5
PERSON_AFTER = 150
OUT_OF_SERVICE = f"{OUT_OF_SERVICE_TAINT}=nodeshutdown:{NODE_LOST_EFFECT}"  # the documented action
ANCHOR = "jax-training.dev/node-loss-anchor"
SETS = ["training.epochs=1", f"training.log_every={LOG_EVERY}", "data.download=false", "persistence.enabled=true",
        "image.pull_policy=Never", "backoff_limit=3"]
# Eight trainers of four jobs, and what replaces a lost node's, fit one node's 2 CPUs and its memory.
# The same cpu limit on every job: a TrainJob's limits without one take its request (0.1 CPU), and it
# trained at a fifth of the others' pace.
SET_JSON = ['data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}',
            'persistence.storage_class="-"',
            'resources={"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "3Gi"}}']
TARGET_SETS = {"trainjob": ["trainjob.own_runtime=true"]}
SHORT = {"indexed-job": "job", "jobset": "js", "trainjob": "tj", "jaxjob": "jax"}
# What bounds each phase: (from mark, to mark, what it is). "freed": the person's action where one
# was needed, else the moment the victim pod was marked for deletion.
PHASES = {
    "not_ready_detection": ("fault", "node_not_ready", ("the node controller: no heartbeat for "
                            "--node-monitor-grace-period (the controller-manager's default, 40 s)")),
    "toleration": ("node_tainted", "victim_evicted", "failure.node_lost_seconds (30): then the taint manager evicts"),
    "pod_end": ("freed", "victim_gone", ("the pod's end: a drained pod's stop and save; a lost node's pod only "
                "once the out-of-service taint lets the pod garbage collector delete it")),
    "replacement": ("victim_gone", "new_pods_created", "the target's controller creates the replacements"),
    "scheduling": ("new_pods_created", "new_pods_scheduled", "kube-scheduler"),
    "start": ("new_pods_scheduled", "new_containers_running", "the kubelet: sandbox, CNI, runc"),
    "rendezvous": ("new_containers_running", "distributed_initialised",
                   "the trainer's start-up and every process joining the coordinator"),
    "to_first_step": ("distributed_initialised", "first_step", "restore, compile, the first steps"),
}


@dataclass(frozen=True)
class Plan:
    """How long each job of a round trains, how often it checkpoints, when the fault comes (every job
    holds after step after_step, having checkpointed before it, until the round releases them all and
    each has trained past it), its failure.node_lost_seconds (None: the variable's default), and more
    NAME=VALUE sets of its own (after the round's)."""
    train_examples: int = TRAIN_EXAMPLES
    checkpoint_every: int = CHECKPOINT_EVERY
    after_step: int = AFTER_STEP
    node_lost_seconds: int | None = None
    extra: tuple[str, ...] = ()

    def sets(self) -> list[str]:
        lost = [] if self.node_lost_seconds is None else [f"failure.node_lost_seconds={self.node_lost_seconds}"]
        return [f"training.train_examples={self.train_examples}", f"checkpoint.every_steps={self.checkpoint_every}",
                *lost, *self.extra]

    def set_json(self) -> list[str]:
        # the trainer's hidden hold (trainer/faults.py): a job started early waits for the last one
        return [f"program.args={json.dumps(['--hold-after-step', str(self.after_step)])}"]


def log(message: str) -> None:
    print(f"[benchmarks.node_loss] {message}", file=sys.stderr, flush=True)


def node_name(number: int) -> str:
    base = next(line.split("=", 1)[1] for line in (SCRIPTS / "cluster" / "node.env").read_text().splitlines()
                if line.startswith("NODE_NAME="))
    return base if number == 1 else f"{base}-{number}"


def placement(target: str) -> dict:
    """The `affinity` that puts each rank beside the anchor pod labelled with its rank."""
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {ANCHOR: "true"}},
        "matchLabelKeys": [workload(target).index_label]}}]}}


def anchor(number: int, rank: int) -> dict:
    """A pause pod on node `number` carrying every target's index label with value `rank`."""
    labels = {ANCHOR: "true", **{workload(t).index_label: str(rank) for t in TARGETS}}
    pause = next(line.split("=", 1)[1] for line in (SCRIPTS / "cluster" / "node.env").read_text().splitlines()
                 if line.startswith("PAUSE_IMAGE="))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"node-loss-anchor-{number}", "labels": labels},
            "spec": {"nodeName": node_name(number), "terminationGracePeriodSeconds": 0,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65535,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "pause", "image": pause, "imagePullPolicy": "Never",
                                     "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}},
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


class Watch(PodWatch):
    """`kubectl get KIND --watch --output-watch-events -o json`: every event with its arrival time
    (ADDED, MODIFIED, DELETED: a deletion is seen as one)."""

    def __init__(self, env: dict, namespace: str, kind: str, *selection: str):
        self.events: list[tuple[float, dict]] = []
        self.proc = subprocess.Popen(["kubectl", "-n", namespace, "get", kind, *selection, "--watch",
                                      "--output-watch-events", "-o", "json"], env=env, stdout=subprocess.PIPE,
                                     text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def objects(self) -> list[tuple[float, dict]]:
        return [(t, e["object"]) for t, e in self.events]

    def first(self, what) -> float | None:
        """The arrival time of the first event for which what(type, object) holds."""
        return next((t for t, e in self.events if what(e["type"], e["object"])), None)


def node_marks(watch: Watch, fault: float) -> dict:
    def not_ready(_, node):
        return any(c["type"] == "Ready" and c["status"] != "True" for c in node["status"].get("conditions", []))

    return {"node_not_ready": since(watch.first(not_ready), fault),
            "node_tainted": since(watch.first(lambda _, n: node_lost_taint(n)), fault)}


def node_lost_taint(node: dict) -> bool:
    return any(t["key"] in NODE_LOST_TAINTS and t["effect"] == NODE_LOST_EFFECT for t in node["spec"].get("taints", []))


def node_lost_seconds(pod: dict) -> float:
    """The pod's tolerationSeconds of a lost node (failure.node_lost_seconds)."""
    return min((t.get("tolerationSeconds", float("inf")) for t in pod["spec"].get("tolerations", [])
                if t.get("key") in NODE_LOST_TAINTS), default=300)


def since(when: float | None, fault: float) -> float | None:
    return None if when is None else round(when - fault, 2)


def pod_marks(watch: Watch, fault: float, old_pods: list[dict], victim: dict, target: str) -> dict:
    """benchmarks.recovery's pod marks, and the victim pod's eviction (its deletion mark) and end."""
    plain = PodWatch.__new__(PodWatch)
    plain.events = watch.objects()
    marks = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in plain.marks(fault, old_pods, target).items()}
    uid = victim["metadata"]["uid"]
    marks["victim_deleting"] = since(watch.first(lambda _, p: p["metadata"]["uid"] == uid and deleting(p)), fault)
    marks["victim_evicted"] = since(watch.first(lambda _, p: p["metadata"]["uid"] == uid and evicted(p)), fault)
    marks["victim_gone"] = since(watch.first(lambda kind, p: kind == "DELETED" and p["metadata"]["uid"] == uid), fault)
    return marks


def deleting(pod: dict) -> bool:
    """Marked for deletion: evicted, drained, or deleted by its job's restart."""
    return bool(pod["metadata"].get("deletionTimestamp"))


def evicted(pod: dict) -> bool:
    """Evicted: the taint manager's or a drain's DisruptionTarget condition."""
    return any(c["type"] == "DisruptionTarget" and c["status"] == "True" for c in pod["status"].get("conditions", []))


class Nodes(Session):
    """A cluster of real nodes (up.sh --real-nodes 2), MNIST on its host volume: benchmarks.recovery's
    session with a namespace of its own, the jobs of this benchmark and node faults."""

    def __init__(self, state: Path, env: dict, namespace: str, repository: str):
        self.state, self.env, self.namespace, self.repository = state, env, namespace, repository

    @classmethod
    def up(cls, state: Path) -> Nodes:
        run([SCRIPTS / "cluster" / "up.sh", "--real-nodes", "2", "--state-dir", state, "--namespace", NAMESPACE,
             "--owner-pid", os.getpid(), "--max-lifetime", "7200"], os.environ, timeout=1800)
        env = dict(os.environ, KUBECONFIG=str(state / "kubeconfig"))
        run([SCRIPTS / "cluster" / "host-volume.sh", state, NAMESPACE, "mnist", MNIST_DIR], env, 180)
        image = run([SCRIPTS / "image.sh"], env, timeout=1800).strip()
        return cls(state, env, NAMESPACE, image.rsplit(":", 1)[0])

    def kubectl(self, *args, check: bool = True, timeout: float = 60) -> str:
        return run(["kubectl", "-n", self.namespace, *args], self.env, timeout, check)

    def fault(self, action: str, *args: str, wait: bool = True):
        command = [str(SCRIPTS / "cluster" / "node-fault.sh"), str(self.state), node_name(LOST_NODE), action, *args]
        if wait:
            return run(command, self.env, timeout=600)
        return subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def prepare(self, name: str, target: str, build: Path, plan: Plan) -> Path:
        """The build folder of `name`; returns the outputs directory (on the host: both nodes mount it)."""
        volume = Path(run([SCRIPTS / "cluster" / "host-volume.sh", "--no-claim", self.state, self.namespace,
                           f"{name}-outputs"], self.env, 180).strip())
        args = [SCRIPTS / "prepare.sh", REPO_ROOT / "variables" / "examples" / "cpu-local.json", "-o", build,
                "--target", target, "--set", f"name={name}", "--set", f"namespace={self.namespace}",
                "--set", f"image.repository={self.repository}"]
        for s in [*SETS, *plan.sets(), *TARGET_SETS.get(target, [])]:
            args += ["--set", s]
        for s in [*SET_JSON, *plan.set_json(), f"affinity={json.dumps(placement(target))}"]:
            args += ["--set-json", s]
        run(args, self.env, 120)
        return volume / name

    def status(self, name: str) -> str:
        done = subprocess.run([sys.executable, "-m", "generator", "status", name, "--namespace", self.namespace],
                              env=self.env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False)
        return (done.stdout + done.stderr).strip()


class Job:
    """One target's job in a round."""

    def __init__(self, nodes: Nodes, target: str, name: str, tmp: Path, plan: Plan):
        self.target, self.name, self.build, self.plan = target, name, tmp / name, plan
        self.outputs = nodes.prepare(name, target, self.build, plan)
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.pods: list[dict] = []
        self.victim: dict | None = None
        self.watch: Watch | None = None

    def victim_seen(self, what) -> bool:
        """what(pod) held for the victim pod in some event since the watch began."""
        uid = self.victim["metadata"]["uid"]
        return self.watch.first(lambda _, p: p["metadata"]["uid"] == uid and what(p)) is not None

    def metrics(self) -> list[dict]:
        return records(self.outputs / "metrics.jsonl")

    def ready_for_fault(self) -> bool:
        recs = self.metrics()
        return (any(r.get("event") == "checkpoint" and r["step"] >= self.plan.checkpoint_every for r in recs)
                and any(r.get("event") == "step" and r["step"] >= self.plan.after_step for r in recs))

    def trained_past(self, step: int) -> bool:
        return any(r.get("event") == "step" and r["step"] > step for r in self.metrics())

    def ended(self) -> bool:
        """Trained to the end, or stopped: a job that did before the fault has nothing to lose."""
        return self.proc.poll() is not None or any(r.get("event") == "epoch" for r in self.metrics())

    def progress(self) -> str:
        """Where the job is, seconds after its run.sh started: for a round that cannot go on."""
        recs = self.metrics()
        start = next((r["time"] - self.started for r in recs if r.get("event") == "start"), None)
        steps = [r["step"] for r in recs if r.get("event") == "step"]
        return f"{self.name}: training from {start and round(start)} s, at step {max(steps, default=None)}"

    def first_step_after(self, fault: float) -> dict | None:
        after = [r for r in self.metrics() if r["time"] > fault]
        start = next((r for r in after if r.get("event") == "start"), None)
        return start and next((r for r in after if r.get("event") == "step" and r["time"] > start["time"]), None)

    def failed(self) -> str | None:
        if self.proc is not None and self.proc.poll() not in (None, 0):
            return f"run.sh exited {self.proc.returncode}: {self.proc.output.read_text(errors='replace')[-600:]}"
        return None


def wait_all(what: str, jobs: list[Job], probe, timeout: float) -> list[Job]:
    """Poll probe(job) for every job until each holds or fails; returns the jobs for which it does
    not hold after `timeout` seconds (a failed job raises)."""
    deadline = time.monotonic() + timeout
    pending = list(jobs)
    while pending and time.monotonic() < deadline:
        for job in list(pending):
            if probe(job):
                pending.remove(job)
            elif job.failed():
                raise RuntimeError(f"{job.name}: {job.failed()} (waiting for {what})")
        time.sleep(0.5)
    return pending


def undisturbed_accuracy() -> float:
    """The test accuracy of the same training, undisturbed, in one local process."""
    settings = json.loads((REPO_ROOT / "variables" / "examples" / "cpu-local.json").read_text())["training"]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "trainer", "train", "--data-dir", str(MNIST_DIR), "--no-download",
                               "--epochs", "1", "--train-examples", str(TRAIN_EXAMPLES),
                               "--batch-size", str(settings["batch_size"]),
                               "--learning-rate", str(settings["learning_rate"]), "--checkpoint-dir", tmp],
                              capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the undisturbed run failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return final_accuracy(records(Path(tmp) / "jax-training" / "metrics.jsonl"))


def final_accuracy(recs: list[dict]) -> float | None:
    epochs = [r for r in recs if r.get("event") == "epoch"]
    return epochs[-1]["test_accuracy"] if epochs else None


# The order the jobs start in: more controllers between the object and its pods first (a TrainJob's
# make a JobSet, whose make Jobs, whose make pods), so that a slow chain cannot start its job late.
START_ORDER = ("trainjob", "jobset", "jaxjob", "indexed-job")


def start_in_turn(nodes: Nodes, jobs: list[Job], timeout: int) -> None:
    """Starts the (prepared) jobs in START_ORDER, each once the one before has all its pods: one
    whose controllers were slow under load (a minute and more) would otherwise start so late that
    the others could finish before it reaches the fault's step."""
    for job in sorted(jobs, key=lambda j: START_ORDER.index(j.target)):
        job.proc, job.started = nodes.start(job.build, timeout), time.time()
        if wait_all("its pods", [job], lambda j: {rank_of(p, j.target) for p in nodes.pods(j.name, j.target)} == {0, 1},
                    300):
            raise RuntimeError(f"{job.name}: its 2 pods not created in 300 s")


def fault_round(nodes: Nodes, targets: list[str], fault: str, victim_rank: int, tmp: Path, tag: str = "",
                person_after: float = PERSON_AFTER, act_on_eviction: bool = False, timeout: int = 1500,
                plan: Plan = Plan()) -> dict:
    """One job per target, node 2 taken away by `fault` with rank `victim_rank` of each on it; the
    figures per target. A job without a step after the fault for `person_after` seconds (or, with
    act_on_eviction, once its victim pod is evicted) is stuck: the out-of-service taint is put on the
    node. Node 2 is back in service when this returns."""
    lost = node_name(LOST_NODE)
    for number in (1, 2):
        nodes.kubectl("delete", "pod", f"node-loss-anchor-{number}", "--ignore-not-found", "--wait", "--timeout", "60s")
    for number, rank in ((LOST_NODE, victim_rank), (1, 1 - victim_rank)):
        subprocess.run(["kubectl", "-n", nodes.namespace, "apply", "-f", "-"], input=json.dumps(anchor(number, rank)),
                       env=nodes.env, text=True, capture_output=True, check=True, timeout=60)
    nodes.kubectl("wait", "--for", "condition=Ready", "pod", "-l", f"{ANCHOR}=true", "--timeout", "120s", timeout=130)
    jobs: list[Job] = []
    results: dict = {}
    node_watch = None
    process = None
    try:
        jobs.extend(Job(nodes, target, f"nl-{SHORT[target]}-{fault.split('-')[0]}-r{victim_rank}{tag}", tmp, plan)
                    for target in targets)
        start_in_turn(nodes, jobs, timeout)
        # (a hold runs out after HOLD_SECONDS: the first job's would, so the round would fail, by then)
        stuck = wait_all("held after the fault's step", jobs, lambda j: j.ended() or j.ready_for_fault(), HOLD_SECONDS)
        ended = [j for j in jobs if j.ended()]
        if stuck or ended:
            raise RuntimeError(f"not every job held at step {plan.after_step} and none ended in {HOLD_SECONDS} s: "
                               + "; ".join(j.progress() for j in jobs))
        for job in jobs:
            job.pods = nodes.pods(job.name, job.target)
            placed = {rank_of(p, job.target): p["spec"].get("nodeName") for p in job.pods}
            if placed.get(victim_rank) != lost or placed.get(1 - victim_rank) == lost:
                raise RuntimeError(f"{job.name}: ranks placed {placed}, not rank {victim_rank} alone on {lost}")
            job.victim = next(p for p in job.pods if rank_of(p, job.target) == victim_rank)
            job.watch = Watch(nodes.env, nodes.namespace, "pods", "-l", workload(job.target).pod_selector.format(name=job.name))
        # the anchors' work is done (and a drain refuses pods no controller owns)
        nodes.kubectl("delete", "pod", "-l", f"{ANCHOR}=true", "--wait=false")
        node_watch = Watch(nodes.env, nodes.namespace, "nodes", lost)
        listed = wait_all("the watches' first listing", jobs,
                          lambda j: len(j.watch.events) >= len(j.pods) and node_watch.events, 30)
        if listed:
            raise RuntimeError(f"{', '.join(j.name for j in listed)}: its pod watch listed nothing in 30 s")
        for job in jobs:  # all held and watched: they train on, and the fault comes as soon as each does
            (job.outputs / HOLD_RELEASED).touch()
        if wait_all("training past the hold", jobs, lambda j: j.ended() or j.trained_past(plan.after_step), 300) \
                or any(j.ended() for j in jobs):
            raise RuntimeError("not every job trained on after its release, none ended, in 300 s: "
                               + "; ".join(j.progress() for j in jobs))
        if fault == "reboot":
            process = nodes.fault("reboot", str(REBOOT_SECONDS), wait=False)
            fault_time = float(process.stdout.readline())
        else:
            fault_time = float(nodes.fault(fault).split()[0])
        log(f"{fault} of {lost} at {fault_time:.2f}, rank {victim_rank} of {', '.join(j.name for j in jobs)} on it")
        # Stuck: no step after person_after seconds, or (act_on_eviction) once its victim pod is evicted
        # without a step: the moment the documented action applies.
        def decided(job):  # with act_on_eviction: Kubernetes has evicted the pod, or would have by now
            tolerated = node_watch.first(lambda _, n: node_lost_taint(n)) or float("inf")
            return job.first_step_after(fault_time) or job.proc.poll() is not None or act_on_eviction and \
                job.victim_seen(deleting) and (job.victim_seen(evicted) or
                                               time.time() > tolerated + node_lost_seconds(job.victim) + 2)
        wait_all("a training step after the fault" + (" or the eviction" if act_on_eviction else ""), jobs,
                 decided, person_after)
        early = [j for j in jobs if j.proc.poll() is not None and not j.first_step_after(fault_time)]
        if early:  # failed, or the fault missed it: nothing to measure (a plan with more steps after AFTER_STEP)
            raise RuntimeError("; ".join(j.failed() or f"ended before the {fault} reached its rank {victim_rank}: "
                                         f"{j.progress()}" for j in early))
        stuck = [j for j in jobs if not j.first_step_after(fault_time)]
        action = None
        for job in stuck:
            results[job.target] = {"stuck_after": round(time.time() - fault_time, 2),
                                   "status_when_stuck": nodes.status(job.name)}
        if stuck:
            log(f"stuck: {', '.join(j.name for j in stuck)}; tainting {lost} out-of-service")
            run(["kubectl", "taint", "node", lost, OUT_OF_SERVICE, "--overwrite"], nodes.env, 60)
            action = time.time() - fault_time
            left = wait_all("a training step after the person's action", stuck,
                            lambda j: j.first_step_after(fault_time), person_after)
            for job in left:
                results[job.target]["still_stuck_after_action"] = nodes.status(job.name)
        wait_all("the end of training", [j for j in jobs if j.first_step_after(fault_time)],
                 lambda j: j.proc.poll() == 0, timeout)
        for job in jobs:
            job.watch.stop()
            results.setdefault(job.target, {}).update(
                figures(nodes, job, fault_time, node_marks(node_watch, fault_time), action))
    finally:
        if node_watch:
            node_watch.stop()
        for job in jobs:
            if job.watch and job.watch.proc.poll() is None:
                job.watch.stop()
        restore(nodes, fault, process)
        with ThreadPoolExecutor(len(jobs) or 1) as pool:  # each clean.sh waits for its job's pods to go
            list(pool.map(lambda j: nodes.clean(j.build, j.proc), [j for j in jobs if j.proc]))
    return results


def restore(nodes: Nodes, fault: str, process: subprocess.Popen | None) -> None:
    """Node 2 back in service: powered on (or its reboot waited for), uncordoned, its out-of-service taint gone."""
    lost = node_name(LOST_NODE)
    if process is not None:
        process.wait(timeout=600)
    elif fault == "power-off":
        # (already on where the round failed before its fault)
        subprocess.run([str(SCRIPTS / "cluster" / "node-fault.sh"), str(nodes.state), lost, "power-on"],
                       env=nodes.env, capture_output=True, timeout=300, check=False)
    nodes.fault("uncordon")
    run(["kubectl", "taint", "node", lost, f"{OUT_OF_SERVICE_TAINT}-"], nodes.env, 60, check=False)
    run(["kubectl", "wait", "--for", "condition=Ready", f"node/{lost}", "--timeout", "120s"], nodes.env, 130)


def figures(nodes: Nodes, job: Job, fault: float, node: dict, action: float | None) -> dict:
    first = job.first_step_after(fault)
    recs = job.metrics()
    start = next((r for r in recs if r.get("event") == "start" and r["time"] > fault), None)
    marks = {"fault": 0.0, **node, **pod_marks(job.watch, fault, job.pods, job.victim, job.target),
             "person_action": None if action is None else round(action, 2)}
    old_uids = {p["metadata"]["uid"] for p in job.pods}
    now = nodes.pods(job.name, job.target)
    rank0 = [p for p in now if rank_of(p, job.target) == 0]
    if rank0:
        pod = min(rank0, key=lambda p: p["metadata"]["uid"] in old_uids)["metadata"]["name"]
        lines = [(t, text) for t, text in nodes.rank0_log(pod, job.target) if t > fault]
        marks["distributed_initialised"] = since(next((t for t, text in lines if "global devices" in text), None), fault)
    marks["first_step"] = since(first["time"], fault) if first else None
    marks["freed"] = marks["person_action"] if marks["person_action"] is not None else marks["victim_deleting"]
    before = [r["step"] for r in recs if r.get("event") == "step" and r["time"] <= fault]
    saved = next((r for r in recs if r.get("event") == "preempted" and r["time"] > fault), None)  # a graceful stop's
    out = {**marks, "resumed_step": start["step"] if start else None, "last_step_logged_before": max(before, default=None),
           "stop_saved_step": saved["step"] if saved else None,
           "test_accuracy": final_accuracy(recs), "completed": job.proc.poll() == 0}
    out["phases"] = recovery.phases(marks, PHASES)
    return out


def summarize(runs: list[dict]) -> dict:
    """benchmarks.recovery's medians over repeats, and how many runs needed a person and completed."""
    summary = recovery.summarize(runs, table=PHASES)
    for key in ("test_accuracy", "resumed_step"):  # not to 2 decimals
        values = [r[key] for r in runs if r.get(key) is not None]
        summary[key] = statistics.median_low(values) if values else None
    summary["needed_a_person"] = sum("stuck_after" in r for r in runs)
    summary["completed"] = sum(bool(r.get("completed")) for r in runs)
    return summary


COLUMNS = ("node_not_ready", "node_tainted", "victim_deleting", "victim_evicted", "person_action", "victim_gone",
           "new_pods_created", "new_containers_running", "distributed_initialised", "first_step")


def markdown(report: dict) -> str:
    def cell(value):
        return "" if value is None else f"{value:.1f}"
    lines = ["| target × fault × rank lost | runs | " + " | ".join(COLUMNS)
             + " | resumed at step | accuracy (undisturbed) | a person needed |",
             "|---|---|" + "---|" * (len(COLUMNS) + 3)]
    phase_lines = ["| target × fault × rank lost | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    for key, result in report["results"].items():
        m = summarize(result["runs"]) if result["runs"] else None  # (from the runs: a report's own may be older)
        if not m:
            lines.append(f"| {key} | 0 | failed: {result['errors'][0][:160]} |")
            continue
        runs = len(result["runs"])
        accuracy = "" if m.get("test_accuracy") is None else f"{m['test_accuracy']:.4f} ({report['undisturbed_accuracy']:.4f})"
        lines.append(f"| {key} | {runs} | " + " | ".join(cell(m.get(c)) for c in COLUMNS)
                     + f" | {m.get('resumed_step')} | {accuracy} | {m['needed_a_person']} of {runs} |")
        phase_lines.append(f"| {key} | " + " | ".join(cell(m["phases"].get(p)) for p in PHASES) + " |")
    rev = report.get("revision") or {}
    return "\n".join([*lines, "", *phase_lines, "",
                      (f"Commit {rev.get('commit')}, {report.get('date')}, {report['cpus']} CPUs; seconds after the "
                       "fault; a person's action (the out-of-service taint) "
                       + ("once the pods were evicted." if report.get("act_on_eviction") else
                          f"after {report['person_after']} s without a step."))])


def results_of(runs: dict[str, list], errors: dict[str, list]) -> dict:
    """Per target × fault × rank: its runs, their medians and the errors of the rounds that failed."""
    return {cell: {"runs": runs.get(cell, []), "median": summarize(runs[cell]) if runs.get(cell) else None,
                   "errors": errors.get(cell, [])} for cell in dict.fromkeys([*runs, *errors])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.node_loss", description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--victim-ranks", default="1,0", help="comma-separated ranks to lose (0, 1)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of each fault × rank")
    parser.add_argument("--rounds", help="comma-separated FAULT:RANK, a round each, in place of the "
                        "--faults × --victim-ranks × --repeats rounds (a pair named twice is repeated)")
    parser.add_argument("--person-after", type=int, default=PERSON_AFTER,
                        help="seconds without a training step after which a person takes the documented action")
    parser.add_argument("--act-on-eviction", action="store_true",
                        help="the person acts once Kubernetes has evicted the lost node's pods (as the tests do), "
                             "not --person-after seconds after the fault")
    report_options(parser, "person_after", "phases", "results")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(args.markdown))
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.rounds:
        pairs = [tuple(r.partition(":")[::2]) for r in args.rounds.split(",")]
        args.faults, args.victim_ranks = ",".join(f for f, _ in pairs), ",".join(r for _, r in pairs)
    else:
        pairs = [(f, r) for f in args.faults.split(",") for r in args.victim_ranks.split(",") for _ in range(args.repeats)]
    targets, faults, ranks = args.targets.split(","), args.faults.split(","), args.victim_ranks.split(",")
    option = "--rounds" if args.rounds else None
    for value, known, name in ((targets, TARGETS, "--targets"), (faults, FAULTS, option or "--faults"),
                               (ranks, ("0", "1"), option or "--victim-ranks")):
        if not set(value) <= set(known):
            parser.error(f"{name}: {', '.join(sorted(set(value) - set(known)))} not one of {', '.join(known)}")
    if os.geteuid() != 0:
        parser.error("the real-node tier needs root")
    load_before = os.getloadavg()
    report: dict = {**stamp(), "targets": targets, "rounds": [f"{f}:{r}" for f, r in pairs], "person_after": args.person_after,
                    "act_on_eviction": args.act_on_eviction, "train_examples": TRAIN_EXAMPLES,
                    "checkpoint_every": CHECKPOINT_EVERY, "after_step": AFTER_STEP, "reboot_seconds": REBOOT_SECONDS,
                    "phases": {p: {"from": b, "to": e, "bounded_by": why} for p, (b, e, why) in PHASES.items()},
                    "cpus": os.cpu_count(), "results": {}}
    report["undisturbed_accuracy"] = undisturbed_accuracy()
    with cluster_lock(), tempfile.TemporaryDirectory(prefix="jaxt-bench-node-loss.") as tmp:
        state = Path(tmp) / "cluster"
        try:
            nodes = Nodes.up(state)
            runs: dict[str, list] = {}
            errors: dict[str, list] = {}
            for number, (fault, rank) in enumerate(pairs):
                cells = [f"{t} × {fault} × rank {rank}" for t in targets]
                try:
                    round_ = fault_round(nodes, targets, fault, int(rank), Path(tmp), f"-{number}", args.person_after,
                                         args.act_on_eviction)
                    for target, cell in zip(targets, cells):
                        runs.setdefault(cell, []).append(round_[target])
                except (RuntimeError, subprocess.SubprocessError) as e:
                    log(f"{fault} × rank {rank}: {e}")
                    for cell in cells:
                        errors.setdefault(cell, []).append(str(e)[:2000])
                report["results"] = results_of(runs, errors)
                if args.output:  # what a run stopped early has measured so far
                    write_report(args.output, json.dumps(report, indent=2, ensure_ascii=False))
        finally:
            subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], capture_output=True, timeout=300, check=False)
    publish(report, load_before, args.output, lambda r: json.dumps(r, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
