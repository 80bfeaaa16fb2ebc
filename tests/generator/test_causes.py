"""The cause line's choice, from objects as the API server returns them (the e2e tiers produce each
cause for real: tests/e2e_k8s/test_causes.py and the real node's tests; SLURM's in tests/e2e_slurm)."""

from __future__ import annotations

from generator.engines.kubernetes import causes, jobs
from generator.engines.slurm import jobs as slurm_jobs
from generator.job_status import CAUSE_WIDTH, JobStatus, table
from trainer import exit_codes

T0 = "2026-01-01T00:00:00Z"
T = "2026-01-01T00:00:{:02d}Z"
NOW = 1767225600.0 + 60  # T0 + 60 s


class Recorded(causes.Reader):
    """The namespace's events and claims as recorded."""

    def __init__(self, events=(), claims=None, nodes=()):
        super().__init__(kube=None)
        self._events, self.claims, self._nodes = list(events), claims or {}, list(nodes)

    def claim(self, name):
        return self.claims.get(name)

    def cluster_queue(self, local_queue):
        return "cq"


def pod(rank: int, phase="Running", containers=(), conditions=(), created=T0, **spec) -> dict:
    workload = jobs.KINDS["Job"].workload
    return {"metadata": {"name": f"demo-{rank}-{created[-3:-1]}", "creationTimestamp": created,
                         "ownerReferences": [{"uid": "u1"}],
                         "labels": {"batch.kubernetes.io/job-name": "demo", workload.index_label: str(rank)}},
            "spec": {"containers": [{"name": workload.container, "image": "registry.example/trainer:1",
                                     "resources": {"requests": {"cpu": "100"}}}], **spec},
            "status": {"phase": phase, "conditions": list(conditions),
                       "containerStatuses": [{"name": workload.container, **c} for c in containers]}}


def job(*pods, **status) -> jobs._Job:
    return jobs._Job({"kind": "Job", "metadata": {"name": "demo", "uid": "u1", "creationTimestamp": T0},
                      "spec": {"parallelism": 2}, "status": status}, list(pods), [])


def cause(j: jobs._Job, reader=None, nodes=()) -> str:
    return causes.cause(j, j.phase()[0], list(nodes), reader or Recorded(), NOW)


UNSCHEDULED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
               "message": "0/4 nodes are available: 4 Insufficient cpu. no new claims to deallocate, preemption: 0/4 "
                          "nodes are available: "
                          "4 No preemption victims found for incoming pod."}
PULL = {"state": {"waiting": {"reason": "ImagePullBackOff", "message": (
    'Back-off pulling image "registry.example/trainer:1": ErrImagePull: rpc error: code = Unknown desc = failed to '
    'pull and unpack image "registry.example/trainer:1": dial tcp 10.0.0.1:443: connect: connection refused')}}}


def test_unschedulable_names_what_the_pod_asks_and_drops_the_preemption_words():
    assert cause(job(pod(0, "Pending", conditions=[UNSCHEDULED]))) == (
        "unschedulable: rank 0 asks cpu 100: 0/4 nodes are available: 4 Insufficient cpu")


def test_unschedulable_names_the_taints_the_pod_does_not_tolerate():
    tainted = {**UNSCHEDULED, "message": "0/3 nodes are available: 3 node(s) had untolerated taint(s). preemption: …"}
    nodes = [{"spec": {"taints": [{"key": "gpu", "value": "present", "effect": "NoSchedule"}]}},
             {"spec": {"taints": [{"key": "spot", "effect": "NoExecute"},
                                  {"key": "soft", "effect": "PreferNoSchedule"}]}},
             {"spec": {"taints": [{"key": "tolerated", "value": "x", "effect": "NoSchedule"}]}}]
    tolerates = [{"key": "tolerated", "operator": "Equal", "value": "x"}]
    line = "unschedulable: rank 0: 0/3 nodes are available: 3 node(s) had untolerated taint(s)"
    assert cause(job(pod(0, "Pending", conditions=[tainted], tolerations=tolerates)), Recorded(nodes=nodes)) == (
        f"{line} (gpu=present:NoSchedule, spot:NoExecute)")
    assert cause(job(pod(0, "Pending", conditions=[tainted])), Recorded()) == line  # nodes not readable


def test_image_pull_is_the_reference_and_the_registrys_answer():
    assert cause(job(pod(0, "Pending", containers=[PULL]))) == (
        "image registry.example/trainer:1 cannot be pulled (rank 0, ImagePullBackOff): dial tcp 10.0.0.1:443: "
        "connect: connection refused")


def test_the_earlier_blocker_wins():
    """An unschedulable rank hides another's image pull; a refusal, a lost node and a claim hide both."""
    pods = [pod(0, "Pending", containers=[PULL]), pod(1, "Pending", conditions=[UNSCHEDULED])]
    assert cause(job(*pods)).startswith("unschedulable: rank 1")
    lost = "n1 NotReady (down): rank 0 on it"
    assert cause(job(*pods), nodes=[f"{lost}; it waits"]) == f"node {lost}"
    refused = {"reason": "FailedCreate", "type": "Warning", "lastTimestamp": T.format(5),
               "involvedObject": {"kind": "Job", "uid": "u1"}, "message": 'Error creating: pods "demo-1" is forbidden'}
    assert cause(job(pods[0]), Recorded([refused])) == 'refused at admission: pods "demo-1" is forbidden'
    old = {**refused, "lastTimestamp": "2025-12-31T23:59:00Z"}  # of an earlier job of that name
    assert cause(job(pods[0]), Recorded([old])).startswith("image ")
    claimed = pod(1, "Pending", conditions=[{**UNSCHEDULED, "message": "0/4 nodes are available: pod has unbound "
                                                                       "immediate PersistentVolumeClaims."}],
                  volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    claim = {"metadata": {"uid": "c1"}, "spec": {"storageClassName": "fast"}, "status": {"phase": "Pending"}}
    said = {"reason": "ProvisioningFailed", "involvedObject": {"uid": "c1"}, "lastTimestamp": T.format(9),
            "message": 'storageclass.storage.k8s.io "fast" not found'}
    assert cause(job(pods[0], claimed), Recorded([said], {"data": claim})) == (
        'claim data (StorageClass fast) is Pending: storageclass.storage.k8s.io "fast" not found')
    assert cause(job(pods[0], claimed), Recorded()) == "claim data does not exist"
    # a provisioner's repeated "waiting" (Normal, newer) does not hide its failure (a Warning)
    said = {**said, "type": "Warning", "message": "failed to provision volume: quota exceeded"}
    waiting = {"type": "Normal", "reason": "ExternalProvisioning", "involvedObject": {"uid": "c1"},
               "lastTimestamp": T.format(30), "message": "Waiting for a volume to be created"}
    assert cause(job(pods[0], claimed), Recorded([waiting, said], {"data": claim})).endswith(
        "is Pending: failed to provision volume: quota exceeded")


def failed(rank: int, code: int, finished: int, created=T0) -> dict:
    return pod(rank, "Failed", created=created, containers=[
        {"state": {"terminated": {"exitCode": code, "reason": "Error", "finishedAt": T.format(finished)}}}])


def running(rank: int, started: int) -> dict:
    return pod(rank, created=T.format(started), containers=[{"state": {"running": {"startedAt": T.format(started)}}}])


def test_a_restarted_rank_its_exit_codes_meaning_the_attempt_and_the_time_lost():
    hang = exit_codes.describe(exit_codes.HANG)
    # rank 0 only saw its peer die (141): the rank that hung is the cause
    restarted = job(failed(1, exit_codes.HANG, 10), failed(0, exit_codes.PEER_LOST, 12), running(1, 24), running(0, 25),
                    failed=1)
    assert cause(restarted) == f"restarted: rank 1 ended with {hang}; attempt 2, 0:00:14 lost"
    waiting = job(failed(1, exit_codes.HANG, 10), running(0, 1), pod(1, "Pending", created=T.format(11)), failed=1)
    assert cause(waiting) == f"restarting: rank 1 ended with {hang}; attempt 2, 0:00:50 lost so far"
    in_place = job(pod(1, containers=[{"restartCount": 2, "state": {"running": {"startedAt": T.format(30)}},
                                       "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                                    "finishedAt": T.format(20)}}}]))
    assert cause(in_place) == ("restarted: rank 1 ended with exit code 137 (killed by SIGKILL) (OOMKilled); "
                               "attempt 3, 0:00:10 lost")
    assert cause(job(failed(1, exit_codes.HANG, 10), failed=1, conditions=[
        {"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}])) == ""  # failed: its reason says
    assert cause(job(running(0, 1), running(1, 1))) == ""


def test_kueues_reason_names_the_cluster_queue():
    held = jobs._Job({"kind": "Job", "metadata": {"name": "demo", "uid": "u1", "labels": {
        "kueue.x-k8s.io/queue-name": "lq"}}, "spec": {"suspend": True}}, [], [
        {"metadata": {"labels": {"kueue.x-k8s.io/job-uid": "u1"}}, "status": {"conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending",
             "message": "couldn't assign flavors to pod set main: insufficient quota for cpu"}]}}])
    assert cause(held) == ("waiting in Kueue's ClusterQueue cq (LocalQueue lq): couldn't assign flavors to pod set "
                           "main: insufficient quota for cpu")


def test_slurm_pending_reasons_in_words_and_the_requeue_count():
    assert slurm_jobs._cause("PENDING", "Resources", 0) == (
        "waiting: the resources it asks for are busy (squeue: Resources)")
    assert slurm_jobs._cause("PENDING", "ReqNodeNotAvail, UnavailableNodes:n1", 0).startswith(
        "waiting: a node it needs is not available (down, drained or reserved) (squeue: ReqNodeNotAvail, ")
    assert slurm_jobs._cause("PENDING", "QOSMaxJobsPerUserLimit", 0).startswith(
        "waiting: a limit of its QOS is reached")
    assert slurm_jobs._cause("PENDING", "SomethingNew", 0) == "waiting: squeue says SomethingNew"
    assert slurm_jobs._cause("PENDING", "BeginTime", 1).endswith("; requeued 1 time, attempt 2")
    assert slurm_jobs._cause("RUNNING", "None", 2) == "requeued 2 times, attempt 3"
    assert slurm_jobs._cause("RUNNING", "None", 0) == slurm_jobs._cause("COMPLETED", "None", 3) == ""


def test_list_shows_a_cause_column_only_where_a_job_has_one_and_shortens_it():
    plain = [JobStatus(name="a", kind="Job", phase="Running")]
    assert table(plain)[0].split() == ["NAME", "KIND", "PHASE", "PROGRESS", "ETA", "AGE"]
    long = "unschedulable: rank 0 asks cpu 100: " + "0/4 nodes are available: 4 Insufficient cpu" * 3
    rows = table([*plain, JobStatus(name="b", kind="Job", phase="Pending", cause=long)])
    assert rows[0].split()[-1] == "CAUSE" and rows[1].endswith("  -")
    assert rows[2].endswith(long[:CAUSE_WIDTH - 1] + "…")
    assert JobStatus(name="b", kind="Job", phase="Pending", cause=long).lines()[1:3] == ["phase:      Pending",
                                                                                        f"cause:      {long}"]


def test_a_jobset_that_recreated_its_child_jobs_says_so_without_the_pods_of_the_failure():
    restarted = jobs._Job({"kind": "JobSet", "metadata": {"name": "demo", "uid": "u1"},
                           "spec": {"replicatedJobs": [{"replicas": 1, "template": {"spec": {"parallelism": 2}}}]},
                           "status": {"restarts": 1}}, [], [])
    assert cause(restarted) == "restarted by the JobSet: attempt 2"
