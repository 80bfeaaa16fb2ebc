"""`jaxgen status|list|logs` on Kubernetes: what the cluster already has about a job of this project.

A job is the object of a target in generator/targets.py (its workload's kind) with the
project's name label; a JobSet's child Jobs and a TrainJob's JobSet are parts of another job, not
jobs. For each: its conditions (phase), its pods (selected as scripts/run.sh selects them, by the
target's pod selector and the job's uid), Kueue's Workload of it (queue state), the TrainJob's
trainerStatus, and process 0's metrics endpoint, read through the API server's pod proxy."""

from __future__ import annotations

import json
import time
from datetime import datetime

from trainer.contract import METRICS_PATH
from trainer.integers import parse_count
from trainer.outputs import result_of_message
from trainer.termination import error_of_message

from ... import job_status, targets
from . import causes, kueue
from ...errors import UserError
from ...job_status import FAILED, PENDING, QUEUED, RUNNING, STOPPED, SUCCEEDED, JobStatus
from .kubectl import ClusterError, Kubectl, NotFound
from .log_stream import LogStream
from .outputs import NOT_RECORDED, recorded
from .policy import (INSTANCE_LABEL, METRICS_PORT_NAME, NODE_LOST_EFFECT, NODE_LOST_TAINTS, OUT_OF_SERVICE_TAINT,
                     PROJECT_SELECTOR)

WORKLOADS = "workloads.kueue.x-k8s.io"
METRICS_TIMEOUT = "1s"  # process 0's endpoint answers at once; one that does not is not worth a slow status
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
KINDS = {t.workload.kind: t for t in targets.TARGETS.values() if t.workload}


def _age(timestamp: str | None, now: float) -> float | None:
    if not timestamp:
        return None
    return max(now - datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp(), 0.0)


def _is_part(obj: dict) -> bool:
    """A JobSet's child Job, a TrainJob's JobSet: part of another job of the table."""
    return any(ref.get("kind") in KINDS for ref in obj["metadata"].get("ownerReferences") or [])


def _find_objects(kube: Kubectl, selector: str) -> list[dict]:
    """The jobs of every kind: one kubectl call, or one per kind where the cluster lacks a kind's API."""
    resources = [t.workload.resource for t in KINDS.values()]
    try:
        found = kube.get(",".join(resources), "-l", selector)["items"]
    except NotFound:
        found = [obj for objs in kube.many([lambda r=r: kube.items(r, selector) for r in resources]) for obj in objs]
    return [obj for obj in found if obj.get("kind") in KINDS and not _is_part(obj)]


class _Job:
    """One job object and what the cluster has about it."""

    def __init__(self, obj: dict, pods: list[dict], workloads: list[dict]):
        self.obj, self.meta = obj, obj["metadata"]
        self.target = KINDS[obj["kind"]]
        self.workload = self.target.workload
        self.name, self.uid = self.meta["name"], self.meta["uid"]
        self.pods = [p for p in pods if self._owns(p)]
        self.kueue = next((w for w in workloads if self._kueue_of(w)), None)

    def _owns(self, pod: dict) -> bool:
        labels = pod["metadata"].get("labels") or {}
        want = dict(item.split("=", 1) for item in self.workload.pod_selector.format(name=self.name).split(","))
        if any(labels.get(k) != v for k, v in want.items()):
            return False
        if self.workload.owner_label:
            return labels.get(self.workload.owner_label) == self.uid
        if self.workload.owns_pods:
            return any(ref.get("uid") == self.uid for ref in pod["metadata"].get("ownerReferences") or [])
        return True  # a runtime's pods (TrainJob): owned by objects it made, found by name only

    def _kueue_of(self, workload: dict) -> bool:
        return ((workload["metadata"].get("labels") or {}).get(JOB_UID_LABEL) == self.uid
                or any(ref.get("uid") == self.uid for ref in workload["metadata"].get("ownerReferences") or []))

    def conditions(self) -> dict[str, dict]:
        return {c["type"]: c for c in (self.obj.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"}

    def rank(self, pod: dict) -> int | None:
        value = (pod["metadata"].get("labels") or {}).get(self.workload.index_label)
        return parse_count(value)

    def pod_of_rank(self, rank: int, started: bool = True) -> dict | None:
        """The newest pod of that rank (a replaced pod's successor), started ones only if `started`."""
        pods = [p for p in self.pods if self.rank(p) == rank
                and (not started or p.get("status", {}).get("phase") != "Pending")]
        return max(pods, key=lambda p: p["metadata"]["creationTimestamp"], default=None)

    def hosts(self) -> int | None:
        spec = self.obj.get("spec") or {}
        kind = self.obj["kind"]
        if kind == "Job":
            return spec.get("parallelism")
        if kind == "JobSet":
            return sum((r.get("template", {}).get("spec", {}).get("parallelism") or 1) * (r.get("replicas") or 1)
                       for r in spec.get("replicatedJobs") or [])
        if kind == "JAXJob":
            return (spec.get("jaxReplicaSpecs", {}).get("Worker") or {}).get("replicas")
        return (spec.get("trainer") or {}).get("numNodes")

    def queue(self) -> str:
        queue = (self.meta.get("labels") or {}).get(kueue.QUEUE_LABEL)
        if not queue:
            return ""
        if (waiting := self.kueue_wait()) is not None:
            return f"pending in LocalQueue {queue}: {waiting[1]}"
        status = (self.kueue or {}).get("status") or {}
        if any(c["type"] == "Finished" and c.get("status") == "True" for c in status.get("conditions") or []):
            return f"finished (LocalQueue {queue})"
        cluster_queue = (status.get("admission") or {}).get("clusterQueue", "?")
        return f"admitted by ClusterQueue {cluster_queue} (LocalQueue {queue})"

    def kueue_wait(self) -> tuple[str, str] | None:
        """(LocalQueue, Kueue's reason) while Kueue holds the job: no Workload yet, or one neither
        admitted nor finished; None where it does not."""
        queue = (self.meta.get("labels") or {}).get(kueue.QUEUE_LABEL)
        if not queue:
            return None
        if self.kueue is None:
            return queue, (f"no Kueue Workload yet (is Kueue running and its integration for {self.obj['kind']} "
                           "enabled?)")
        conditions = {c["type"]: c for c in (self.kueue.get("status") or {}).get("conditions") or []}
        if any(conditions.get(name, {}).get("status") == "True" for name in ("Admitted", "Finished")):
            return None
        return queue, next((c.get("message") for name in ("QuotaReserved", "Admitted", "Evicted")
                            if (c := conditions.get(name)) and c.get("message")), "waiting for quota")

    def restarts(self) -> int:
        status = self.obj.get("status") or {}
        counted = [status.get("restarts") or 0]  # a JobSet's
        counted.append(sum(cs.get("restartCount", 0) for p in self.pods
                           for cs in (p.get("status") or {}).get("containerStatuses") or []))
        if self.obj["kind"] == "Job":
            counted.append(status.get("failed") or 0)
        return max(counted)

    def trainer_error(self) -> str:
        """The trainer's own line of why it failed: the newest pod's termination message that is an error."""
        for pod in sorted(self.pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True):
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                message = ((cs.get("state") or {}).get("terminated") or {}).get("message", "")
                if cs.get("name") == self.workload.container and (line := error_of_message(message)):
                    return f"pod {pod['metadata']['name']}: {line}"
        return ""

    def phase(self) -> tuple[str, str]:
        conditions = self.conditions()
        if "Failed" in conditions:
            c = conditions["Failed"]
            return FAILED, self.trainer_error() or c.get("message") or c.get("reason", "")
        if self.workload.succeeded in conditions:
            return SUCCEEDED, ""
        if "Suspended" in conditions or self.suspended():
            return (QUEUED, "") if (self.meta.get("labels") or {}).get(kueue.QUEUE_LABEL) else (STOPPED, "suspended")
        running = sum((p.get("status") or {}).get("phase") == "Running" for p in self.pods)
        if running and running >= (self.hosts() or 1):
            return RUNNING, ""
        return PENDING, ""  # why: its cause line (causes.py)

    def suspended(self) -> bool:
        """Whether the job's `suspend` (where its row says it sits) is set."""
        path, node = self.workload.suspend_path, self.obj
        for key in path[:-1]:
            node = node.get(key) or {}
        return bool(path and node.get(path[-1]))

    def pods_line(self) -> str:
        if not self.pods:
            return ""
        phases = [(p.get("status") or {}).get("phase", "Unknown") for p in self.pods]
        counts = {phase: phases.count(phase) for phase in dict.fromkeys(phases)}
        expected = self.hosts()
        head = f"{counts.get('Running', 0)}/{expected} running" if expected else f"{counts.get('Running', 0)} running"
        rest = ", ".join(f"{n} {phase.lower()}" for phase, n in counts.items() if phase != "Running")
        return head + (f", {rest}" if rest else "")

    def pod_spec(self) -> dict:
        pod = self.pod_of_rank(0, started=False)
        if pod:
            return pod.get("spec") or {}
        node = self.obj
        for key in self.workload.pod_spec_path:
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError):
                return {}
        return node

    def results(self) -> str:
        """Where the outputs are, as the job object records it (outputs.py), never the container's args: the
        bucket's copy, else the directory on the volume of process 0's container mounted there."""
        found = recorded(self.obj)
        if found is None:
            return NOT_RECORDED
        if found.uri:
            return f"{found.uri} (jaxgen results {found.uri} fetches it)"
        spec, where = self.pod_spec(), found.directory
        container = next((c for c in spec.get("containers") or [] if c.get("name") == self.workload.container), None)
        if container is None:  # no pod yet of a kind whose object holds no pod spec (TrainJob): no volume known
            return where
        mounts = sorted((m for m in container.get("volumeMounts") or []
                         if where == m["mountPath"] or where.startswith(m["mountPath"].rstrip("/") + "/")),
                        key=lambda m: len(m["mountPath"]))
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        volume = volumes.get(mounts[-1]["name"], {}) if mounts else {}
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            return f"{where} on claim {claim} (scripts/run.sh fetches it; then jaxgen results DIR)"
        if "hostPath" in volume:
            return f"{where} on the node's {volume['hostPath']['path']}"
        return f"{where} in process 0's pod (an emptyDir: lost with the pod)"

    def metrics_port(self, pod: dict) -> str | None:
        port = (pod["metadata"].get("annotations") or {}).get("prometheus.io/port")
        if port:
            return port
        for container in (pod.get("spec") or {}).get("containers") or []:
            for p in container.get("ports") or []:
                if p.get("name") == METRICS_PORT_NAME:
                    return str(p["containerPort"])
        return None


def _status(job: _Job, kube: Kubectl, now: float, reader: causes.Reader, every_node: bool = False) -> JobStatus:
    """The job's status; its nodes read where `every_node`, else only where a pod of it looks lost."""
    phase, reason = job.phase()
    status = JobStatus(name=job.name, kind=job.obj["kind"], phase=phase, reason=reason, queue=job.queue(),
                       pods=job.pods_line(), restarts=job.restarts(), results=job.results(),
                       age_seconds=_age(job.meta.get("creationTimestamp"), now))
    if every_node or any(_looks_lost(pod) for pod in job.pods):
        status.nodes = _lost_nodes(job, kube, now)
    status.cause = causes.cause(job, phase, status.nodes, reader, now)
    trainer_status = (job.obj.get("status") or {}).get("trainerStatus")
    rank0 = job.pod_of_rank(0)
    port = job.metrics_port(rank0) if rank0 else None
    if rank0 and port and rank0.get("status", {}).get("phase") == "Running":
        path = f"/api/v1/namespaces/{kube.namespace}/pods/{rank0['metadata']['name']}:{port}/proxy{METRICS_PATH}"
        try:
            job_status.apply_series(status, job_status.parse_series(kube.raw(path, 5, METRICS_TIMEOUT)))
        except (UserError, ValueError):  # not serving yet (the data load), or gone: the rest still shows
            pass
    if trainer_status:
        job_status.apply_trainer_status(status, trainer_status)
    if phase == SUCCEEDED and rank0:
        message = next((cs.get("state", {}).get("terminated", {}).get("message", "")
                        for cs in rank0.get("status", {}).get("containerStatuses") or []
                        if cs.get("name") == job.workload.container), "")
        status.result = result_of_message(message.strip().splitlines()[-1]) if message.strip() else ""
    return status


def _snapshot(kube: Kubectl, selector: str) -> list[_Job]:
    objects, pods, workloads = kube.many([lambda: _find_objects(kube, selector),
                                          kube.pods,
                                          lambda: kube.items(WORKLOADS)])
    return [_Job(obj, pods, workloads) for obj in objects]


def _one(kube: Kubectl, name: str) -> _Job:
    jobs = _snapshot(kube, f"{PROJECT_SELECTOR},{INSTANCE_LABEL}={name}")
    jobs = [j for j in jobs if j.name == name]
    if not jobs:
        raise NotFound(f"{name}: no job of this project by that name in namespace {kube.namespace} "
                       f"(jaxgen list shows them)")
    return jobs[0]


def status(name: str, kube: Kubectl) -> JobStatus:
    return _status(_one(kube, name), kube, time.time(), causes.Reader(kube), every_node=True)


def _looks_lost(pod: dict) -> bool:
    """A pod that may sit on a lost node: deleted but not gone, or running and not ready."""
    status = pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return bool(pod["metadata"].get("deletionTimestamp")) or (
        status.get("phase") == "Running" and ready.get("status") != "True")


def _lost_nodes(job: _Job, kube: Kubectl, now: float) -> list[str]:
    """A line per node of the job's live pods that is not Ready: its ranks and what the job waits for.
    Nothing where the nodes cannot be read (a user without access to nodes)."""
    on: dict[str, list[dict]] = {}
    for pod in job.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            on.setdefault(node, []).append(pod)
    if not on:
        return []
    try:
        proc = kube.run("get", "nodes", *sorted(on), "--ignore-not-found", "-o", "json", namespaced=False)
    except UserError:
        return []
    found = json.loads(proc.stdout) if proc.stdout.strip() else {"items": []}
    nodes = {n["metadata"]["name"]: n for n in found.get("items", [found] if found.get("kind") == "Node" else [])}
    lines = []
    for name, pods in sorted(on.items()):
        ranks = sorted(r for r in map(job.rank, pods) if r is not None)
        held = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks)) or '?'}"
        node = nodes.get(name)
        if node is None:
            one = len(pods) == 1
            lines.append(f"{name} is gone (its Node was deleted): {held} on it wait{'s' if one else ''} for the pod "
                         f"garbage collector to delete {'its pod' if one else 'their pods'}, then "
                         f"{'is' if one else 'are'} replaced")
        elif lost := _node_lost(node):
            lines.append(f"{name} {lost}: {held} on it; {_waits_for(name, node, pods, now)}")
    return lines


def _node_lost(node: dict) -> str:
    """How a node is lost ("NotReady (why)", or the taint of its loss), "" when it is not."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    if ready.get("status") != "True":
        return f"NotReady ({(ready.get('message') or ready.get('reason') or 'no Ready condition').rstrip('.')})"
    lost = sorted({t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
                  & {*NODE_LOST_TAINTS, OUT_OF_SERVICE_TAINT})
    return f"tainted {', '.join(lost)}" if lost else ""


def _waits_for(name: str, node: dict, pods: list[dict], now: float) -> str:
    """What the job waits for while these pods sit on a lost node."""
    taints = {t.get("key"): t for t in (node.get("spec") or {}).get("taints") or []
              if t.get("effect") == NODE_LOST_EFFECT}
    if OUT_OF_SERVICE_TAINT in taints:
        return "the node is tainted out of service: Kubernetes deletes its pods, then the job replaces them"
    if all(p["metadata"].get("deletionTimestamp") for p in pods):
        return (f"they are evicted but only the node's kubelet can end them: the job waits (the ranks are not "
                f"replaced) until the node is back, or, if it is down for good, until its Node is deleted "
                f"(kubectl delete node {name}) or tainted out of service (kubectl taint node {name} "
                f"{OUT_OF_SERVICE_TAINT}=nodeshutdown:{NODE_LOST_EFFECT}): docs/kubernetes.md, A lost node")
    taint = next((taints[key] for key in NODE_LOST_TAINTS if key in taints), None)
    if taint is None:
        return "Kubernetes taints the node, then evicts its pods (failure.node_lost_seconds later)"
    seconds = [t.get("tolerationSeconds") for p in pods for t in (p.get("spec") or {}).get("tolerations") or []
               if t.get("key") == taint["key"] and t.get("effect") in (None, "", NODE_LOST_EFFECT)]
    if not seconds or any(s is None for s in seconds):
        return "its pods tolerate the node's loss without limit: the job waits until the node is back"
    left = max(min(seconds) - (_age(taint.get("timeAdded"), now) or 0.0), 0.0)
    return (f"Kubernetes evicts them in {left:.0f} s (tolerationSeconds {min(seconds)}: failure.node_lost_seconds); "
            "the pods of a node that does not come back then end only once its Node is deleted or tainted out "
            "of service")


def jobs(kube: Kubectl) -> list[JobStatus]:
    now = time.time()
    found = sorted(_snapshot(kube, PROJECT_SELECTOR), key=lambda j: j.meta.get("creationTimestamp", ""))
    reader = causes.Reader(kube)
    return kube.many([lambda j=j: _status(j, kube, now, reader) for j in found]) if found else []


def _container_restarts(pod: dict, container: str) -> int:
    return next((cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get("containerStatuses") or []
                 if cs.get("name") == container), 0)


def logs(name: str, rank: int, follow: bool, echo, kube: Kubectl, poll: float = 2.0) -> int:
    """Rank `rank`'s log; with `follow`, until the job ends, moving to the pod that replaces it and to
    the container that restarts in place (its stream ends with the old container; a deleted pod's
    stream does not always end by itself, so it gets a few seconds for its last lines); a stream that
    ends early is followed again (log_stream.py)."""
    stream = followed = None
    try:
        while True:
            job = _one(kube, name)
            pod = job.pod_of_rank(rank)
            finished = job.phase()[0] in job_status.FINISHED
            if pod is None and stream is None and (finished or not follow):
                raise NotFound(f"{name}: no started pod of rank {rank} (jaxgen status {name} says why)")
            container = job.workload.container
            restarts = pod and _container_restarts(pod, container)
            if pod is not None and (pod["metadata"]["uid"], restarts) != followed:
                if stream is not None:
                    stream.finish(timeout=5)
                    stream = None
                followed = (pod["metadata"]["uid"], restarts)
                again = f", restart {restarts}" if restarts else ""
                echo(f"==> pod {pod['metadata']['name']} (rank {rank}{again}) <==")
                args = ["logs", f"pod/{pod['metadata']['name']}", "-c", container]
                if follow and not finished:
                    stream = LogStream(kube, pod["metadata"]["name"], container, restarts, echo)
                else:
                    echo(kube.run(*args, check=False).stdout, nl=False)
            if finished and stream is not None:
                stream.finish(timeout=5)  # the last lines
            if not follow or finished:
                return 0
            time.sleep(poll)
    finally:
        if stream is not None:
            stream.stop()


__all__ = ["ClusterError", "Kubectl", "NotFound", "jobs", "logs", "status"]


class ClusterJobs:
    """The jobs of this project in one namespace of one cluster (engines.base.Jobs)."""

    def __init__(self, context: str | None, namespace: str | None):
        self.kube = Kubectl(context, namespace)

    def status(self, name: str) -> JobStatus:
        return status(name, self.kube)

    def jobs(self) -> list[JobStatus]:
        return jobs(self.kube)

    def logs(self, name: str, rank: int, follow: bool, echo) -> int:
        return logs(name, rank, follow, echo, self.kube)
