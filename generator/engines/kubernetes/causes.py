"""Why a Kubernetes job waits or restarts, in one line: `cause:` of `jaxgen status`, the CAUSE column
of `jaxgen list` (generator/job_status.py shortens it there).

Each cause is read from what the cluster itself says (a condition, an event, a container's state),
never guessed. Several can hold at once; the line is the first that holds in this order, the
earliest thing in a job's way first, since it hides those after it (a pod that cannot be created is
never scheduled; one that is not scheduled pulls no image):

1. refused        the job's controller cannot create its pods or child Jobs: an admission webhook or
                  policy refuses them (the controller's FailedCreate event)
2. node           a node of its pods is NotReady or gone (the first of status's `node:` lines)
3. queued         Kueue holds it: the reason its ClusterQueue gives (quota, flavor, topology)
4. claim          a pod waits for a PersistentVolumeClaim: its name, StorageClass and the claim's event
5. unschedulable  the scheduler's message (what is short: cpu, memory, GPUs; a selector, a taint) and
                  what the pod asks for of it; the taints it does not tolerate, which the scheduler
                  only counts (where the user may list the nodes)
6. image          the kubelet cannot pull an image (the reference and the registry's answer) or
                  create the container
7. restarting     a rank's process ended and is started again: its exit code's meaning
                  (trainer/exit_codes.py), the job's attempt, and the time lost (from the end to the
                  rank running again, or until now)
"""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime

from trainer import exit_codes
from trainer.metrics import format_duration

from ...errors import UserError

PULL_TROUBLE = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")
CREATE_TROUBLE = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
REFUSED_REASONS = ("FailedCreate", "FailedCreatePod")  # the Job controller's, the training-operator's
CLAIM_WORDS = ("PersistentVolumeClaim", "persistentvolumeclaim", "persistent volume")


def _time(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def _event_time(event: dict) -> str:
    return (event.get("lastTimestamp") or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp") or "")


class Reader:
    """What a cause needs beyond the job's own objects, read only when asked and at most once (a
    `jaxgen list` asks from several threads). A read the user may not make is no cause, not an error."""

    def __init__(self, kube):
        self.kube = kube
        self._lock = threading.Lock()
        self._events: list[dict] | None = None
        self._nodes: list[dict] | None = None
        self._read: dict[tuple[str, str], object] = {}

    def events(self) -> list[dict]:
        """The namespace's events, newest first."""
        with self._lock:
            if self._events is None:
                try:
                    found = json.loads(self.kube.raw(f"/api/v1/namespaces/{self.kube.namespace}/events"))["items"]
                except (UserError, ValueError):
                    found = []
                self._events = sorted(found, key=lambda event: _time(_event_time(event)) or 0, reverse=True)
            return self._events

    def _once(self, kind: str, name: str, read):
        """read(), once per (kind, name): jobs of one claim or one queue share the read."""
        key = (kind, name)
        if key not in self._read:
            found = read()
            with self._lock:
                self._read.setdefault(key, found)
        return self._read[key]

    def claim(self, name: str) -> dict | None:
        """The claim, None where it does not exist, {} where it cannot be read."""
        def read():
            try:
                return self.kube.get("persistentvolumeclaim", name)
            except UserError as error:
                return None if "NotFound" in str(error) or "not found" in str(error) else {}
        return self._once("claim", name, read)

    def nodes(self) -> list[dict]:
        """The cluster's nodes; [] where the user may not list them."""
        with self._lock:
            if self._nodes is None:
                try:
                    self._nodes = self.kube.get("nodes", namespaced=False)["items"]
                except UserError:
                    self._nodes = []
            return self._nodes

    def cluster_queue(self, local_queue: str) -> str:
        def read():
            try:
                return ((self.kube.get("localqueues.kueue.x-k8s.io", local_queue).get("spec") or {})
                        .get("clusterQueue", ""))
            except UserError:
                return ""
        return self._once("localqueue", local_queue, read)


def cause(job, phase: str, nodes: list[str], reader: Reader, now: float) -> str:
    """The one line of why `job` (jobs._Job) waits or restarts; "" where it does neither."""
    for check in (_refused, _node, _queued, _claim, _unschedulable, _kubelet, _restarting):
        if line := check(job, phase, nodes, reader, now):
            return line
    return ""


def _refused(job, phase, nodes, reader, now) -> str:
    """The controller's FailedCreate event, on the job or on a child Job of it (<name>-<replicated job>-<i>)."""
    if phase != "Pending" or len(job.pods) >= (job.hosts() or 1):
        return ""
    child = re.compile(rf"{re.escape(job.name)}-[a-z0-9]+-\d+")
    created = _time(job.meta.get("creationTimestamp")) or 0
    for event in reader.events():
        about = event.get("involvedObject") or {}
        if (event.get("reason") in REFUSED_REASONS and (_time(_event_time(event)) or 0) >= created
                and (about.get("uid") == job.uid
                     or about.get("kind") == "Job" and child.fullmatch(about.get("name", "")))):
            return f"refused at admission: {(event.get('message') or '').removeprefix('Error creating: ')}"
    return ""


def _node(job, phase, nodes, reader, now) -> str:
    return f"node {nodes[0].split('; ')[0]}" if nodes else ""


def _queued(job, phase, nodes, reader, now) -> str:
    waiting = job.kueue_wait()
    if phase != "Queued" or waiting is None:
        return ""
    local_queue, why = waiting
    cluster_queue = reader.cluster_queue(local_queue)
    where = f"ClusterQueue {cluster_queue} (LocalQueue {local_queue})" if cluster_queue else f"LocalQueue {local_queue}"
    return f"waiting in Kueue's {where}: {why}"


def _unscheduled(job) -> list[tuple[dict, str]]:
    """(pod, the scheduler's message) of each pod not scheduled, lowest rank first."""
    found = []
    for pod in job.pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                # its first sentence: what follows is about preemption and DRA claims, not this pod's nodes
                message = (condition.get("message") or condition.get("reason") or "").split(". ")[0]
                found.append((pod, message.rstrip(". ")))
    return sorted(found, key=lambda found: job.rank(found[0]) if job.rank(found[0]) is not None else 1 << 30)


def _claim(job, phase, nodes, reader, now) -> str:
    for pod, message in _unscheduled(job):
        if not any(word in message for word in CLAIM_WORDS):
            continue
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if name and (line := _claim_line(name, reader)):
                return line
    return ""


def _claim_line(name: str, reader: Reader) -> str:
    claim = reader.claim(name)
    if claim is None:
        return f"claim {name} does not exist"
    claim_phase = (claim.get("status") or {}).get("phase")
    if not claim or claim_phase == "Bound":
        return ""
    storage_class = (claim.get("spec") or {}).get("storageClassName")
    about = [e for e in reader.events() if (e.get("involvedObject") or {}).get("uid") == claim["metadata"].get("uid")]
    # a provisioner's failure is a Warning; its Normal "waiting for a volume" repeats every resync and hides it
    said = next((e.get("message", "") for e in sorted(about, key=lambda e: e.get("type") != "Warning")), "")
    of = f"StorageClass {storage_class}" if storage_class else "no StorageClass, and the cluster has no default one"
    return f"claim {name} ({of}) is {claim_phase or 'Pending'}" + (f": {said.rstrip('.')}" if said else "")


def _asks(job, pod: dict, message: str) -> str:
    """What the pod asks for that the scheduler's message says no node has: a resource, a node selector."""
    container = next((c for c in (pod.get("spec") or {}).get("containers") or []
                      if c.get("name") == job.workload.container), {})
    resources = container.get("resources") or {}
    wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    asked = [f"{name} {value}" for name, value in wanted.items() if f"Insufficient {name}" in message]
    if "node affinity/selector" in message:
        asked += [f"node selector {key}={value}" for key, value in ((pod.get("spec") or {}).get("nodeSelector")
                                                                    or {}).items()]
    return ", ".join(asked)


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    return any((not t.get("key") and t.get("operator") == "Exists" or t.get("key") == taint.get("key"))
               and (t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""))
               and t.get("effect") in (None, "", taint.get("effect")) for t in tolerations)


def _untolerated(pod: dict, reader: Reader) -> str:
    """The node taints the pod does not tolerate (the scheduler only counts them)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    taints = {f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
              for node in reader.nodes() for t in (node.get("spec") or {}).get("taints") or []
              if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, tolerations)}
    return ", ".join(sorted(taints))


def _unschedulable(job, phase, nodes, reader, now) -> str:
    for pod, message in _unscheduled(job)[:1]:
        asks = _asks(job, pod, message)
        if "untolerated taint" in message and (taints := _untolerated(pod, reader)):
            message += f" ({taints})"
        return f"unschedulable: rank {job.rank(pod)}{f' asks {asks}' if asks else ''}: {message}"
    return ""


def _pull_answer(message: str) -> str:
    """The registry's answer in the kubelet's message, without the words that only repeat the reference."""
    answer = re.sub(r"^(Back-off pulling image \"[^\"]*\": )?(ErrImagePull: )?", "", message)
    answer = re.sub(r"^rpc error: code = \w+ desc = ", "", answer)
    return re.sub(r"^failed to pull and unpack image \"[^\"]*\": ", "", answer).strip() or message


def _kubelet(job, phase, nodes, reader, now) -> str:
    for pod in sorted(job.pods, key=lambda p: (job.rank(p) is None, job.rank(p) or 0)):
        spec = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
        status = pod.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        for cs in statuses:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason, message = waiting.get("reason"), waiting.get("message") or ""
            image = (spec.get(cs.get("name")) or {}).get("image") or cs.get("image", "")
            if reason in PULL_TROUBLE:
                return f"image {image} cannot be pulled (rank {job.rank(pod)}, {reason}): {_pull_answer(message)}"
            if reason in CREATE_TROUBLE:
                return f"container {cs.get('name')} of rank {job.rank(pod)} cannot start ({reason}): {message}"
    return ""


def _failures(job) -> list[dict]:
    """Every end of the trainer's container that was not a success, as the pods still show it."""
    found = []
    for pod in job.pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") != job.workload.container:
                continue
            for ended, again in (((cs.get("state") or {}).get("terminated"), None),
                                 ((cs.get("lastState") or {}).get("terminated"), cs)):
                if ended and ended.get("exitCode") not in (None, 0):
                    found.append({"pod": pod, "rank": job.rank(pod), "ended": ended, "again": again})
    return found


def _restarted_at(job, failure: dict) -> float | None:
    """When the failed rank ran again: its container restarted in place, or a newer pod of the rank."""
    if failure["again"] is not None:
        statuses = [failure["again"]]
    elif failure["rank"] is not None:
        newest = job.pod_of_rank(failure["rank"]) or {}
        statuses = [cs for cs in (newest.get("status") or {}).get("containerStatuses") or []
                    if cs.get("name") == job.workload.container]
    else:
        return None
    finished = _time(failure["ended"].get("finishedAt")) or 0.0
    for cs in statuses:
        started = _time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
        if started and started >= finished:
            return started
    return None


def _restarting(job, phase, nodes, reader, now) -> str:
    if phase in ("Succeeded", "Failed", "Stopped"):
        return ""
    failures = _failures(job)
    restarts = job.restarts()
    if not failures:
        return f"restarted by the {job.obj['kind']}: attempt {restarts + 1}" if restarts else ""
    # The newest end that is not only a peer's loss (141: the rank that died is the cause, not its peers).
    failure = max(failures, key=lambda f: (f["ended"].get("exitCode") != exit_codes.PEER_LOST,
                                           f["ended"].get("finishedAt") or ""))
    ended = failure["ended"]
    meaning = exit_codes.describe(ended["exitCode"])
    if ended.get("reason") and ended["reason"] not in ("Error", "Completed"):
        meaning += f" ({ended['reason']})"
    finished = _time(ended.get("finishedAt"))
    again = _restarted_at(job, failure)
    lost = "" if finished is None else (f", {format_duration(again - finished)} lost" if again else
                                        f", {format_duration(now - finished)} lost so far")
    return (f"{'restarted' if again else 'restarting'}: rank {failure['rank']} ended with {meaning}; "
            f"attempt {max(restarts, 1) + 1}{lost}")
