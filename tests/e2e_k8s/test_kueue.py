"""Kueue (scripts/cluster/up.sh starts it) admits our renders: a ClusterQueue with quota for one job
runs two queued jobs of each kind one after the other, and waitForPodsReady evicts and requeues a job
whose pods cannot all start."""

from __future__ import annotations

import json

import pytest

from generator.targets import workload
from tests.e2e_k8s.kube import SCRIPTS, Cluster, finish, prepare, start_run, wait_until
from tests.e2e_k8s.kueue import (apply, create_queue, delete_queue, diagnose as _diagnose, priority_class,
                                 true_condition as _true, workload_of)

QUEUE = "e2e-queue"
CLUSTER_QUEUE = "e2e-one-job"
# Each job: 2 pods of 1 CPU and 1 GiB; the ClusterQueue holds one job's worth.
HOSTS = 2
RESOURCES = 'resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}'
QUOTA = {"cpu": "2", "memory": "2Gi"}
RUNNING = "pod-complete.stage.kwok.x-k8s.io/delay"  # how long kwok keeps a ready pod running


@pytest.fixture(scope="module")
def queue(cluster):
    """A ResourceFlavor, a ClusterQueue with quota for one job and a LocalQueue in the namespace."""
    create_queue(cluster, CLUSTER_QUEUE, QUEUE, QUOTA)
    yield QUEUE
    delete_queue(cluster, CLUSTER_QUEUE, QUEUE)


def _job(cluster: Cluster, build, target: str, name: str, *sets: str) -> dict:
    """Render a queued job of `target` into `build`, apply it and return its facts."""
    job = _render(cluster, build, target, name, *sets)
    cluster.kubectl("apply", "--server-side", "-f", build)
    return job


def _render(cluster: Cluster, build, target: str, name: str, *sets: str) -> dict:
    """Render a queued job of `target` into `build` (applied later, by its "build"); its facts."""
    prepare(cluster, build, name, f"hosts_count={HOSTS}", "local_device_count=1", "training.batch_size=64",
            RESOURCES, f"queue_name={QUEUE}", *sets, target=target)
    return {**_facts(target, name), "build": build}


def _facts(target: str, name: str) -> dict:
    """How to find the job of `target` named `name`, its pods, and the condition that it succeeded."""
    w = workload(target)
    return {"name": name, "resource": w.resource, "pods": w.pod_selector.format(name=name), "done": w.succeeded}


def _get(cluster: Cluster, job: dict) -> dict:
    return cluster.get(job["resource"], job["name"])


def _pods(cluster: Cluster, job: dict) -> list[dict]:
    return cluster.items("pods", job["pods"])


def _workload(cluster: Cluster, job: dict) -> dict | None:
    return workload_of(cluster, job["resource"], job["name"])


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target", ["indexed-job", "jobset", "trainjob"])
def test_quota_for_one_job_runs_two_queued_jobs_one_after_the_other(cluster, queue, target, tmp_path):
    """Both jobs are created suspended; Kueue admits the first; the second stays suspended with no pod
    while the first runs, and is admitted and completes once the first has completed."""
    short = {"indexed-job": "ij", "jobset": "js", "trainjob": "tj"}[target]
    # The first runs long enough to be running still when the second's Workload is looked at on a
    # loaded host; both are rendered before, so that no render is in between.
    keep_running = f'annotations={{"{RUNNING}": "15s"}}'
    first = _job(cluster, tmp_path / "a", target, f"e2e-kq-{short}-a", keep_running)
    second = _render(cluster, tmp_path / "b", target, f"e2e-kq-{short}-b")
    wait_until(f"{first['name']} admitted and running",
               lambda: not _get(cluster, first)["spec"].get("suspend") and _pods(cluster, first),
               timeout=60, diagnose=lambda: _diagnose(cluster))
    cluster.kubectl("apply", "--server-side", "-f", second["build"])
    waiting = wait_until(f"{second['name']}'s Workload", lambda: _workload(cluster, second), timeout=30)
    assert not _true(waiting, "QuotaReserved") and not _true(waiting, "Admitted"), waiting["status"]

    def first_done() -> bool:
        # until then, the second job is held: suspended, no pod, its Workload pending
        done = bool(_true(_get(cluster, first), first["done"]))
        if not done:
            assert _get(cluster, second)["spec"]["suspend"] is True
            assert _pods(cluster, second) == [], "a pod of the queued job runs beside the admitted one"
            assert not _true(_workload(cluster, second), "Admitted")
        return done

    wait_until(f"{first['name']} to complete", first_done, timeout=90, interval=0.3,
               diagnose=lambda: _diagnose(cluster))
    wait_until(f"{second['name']} to complete after it", lambda: _true(_get(cluster, second), second["done"]),
               timeout=90, diagnose=lambda: _diagnose(cluster))
    assert _true(_workload(cluster, second), "Finished")
    for job in (first, second):
        cluster.kubectl("delete", job["resource"], job["name"], "--wait=true", timeout=60)


@pytest.mark.timeout(180)
def test_a_gang_that_cannot_start_is_evicted_and_requeued(cluster, queue, tmp_path):
    """waitForPodsReady (up.sh: 15 s on kwok): one of the two pods cannot be scheduled (both must run
    on one node and may not share it), so the job never gets all its pods ready; Kueue evicts it
    (PodsReadyTimeout), suspends it so that no partial gang keeps running, and requeues it."""
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "e2e-kq-gang"}}}]}}
    job = _job(cluster, tmp_path / "gang", "indexed-job", "e2e-kq-gang", f'annotations={{"{RUNNING}": "300s"}}',
               'node_selector={"kubernetes.io/hostname": "kwok-cpu-0"}', f"affinity={json.dumps(apart)}")

    def unschedulable(pod: dict) -> bool:
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in pod["status"].get("conditions", []))

    wait_until("one pod running and one unschedulable", lambda: sorted(
        "unschedulable" if unschedulable(p) else p["status"].get("phase") for p in _pods(cluster, job)) ==
        ["Running", "unschedulable"], timeout=60, diagnose=lambda: _diagnose(cluster))

    def evicted() -> dict | None:
        wl = _workload(cluster, job)
        return wl if wl and any(c["type"] == "Evicted" and c["reason"] == "PodsReadyTimeout"
                                for c in wl["status"].get("conditions", [])) else None

    wait_until("Kueue to evict the job (PodsReadyTimeout)", evicted, timeout=60, interval=0.3,
               diagnose=lambda: _diagnose(cluster))
    # suspended: the running pod is stopped with the unschedulable one (before the requeue backoff ends)
    wait_until("the gang to be stopped", lambda: _get(cluster, job)["spec"]["suspend"] is True and
               not _pods(cluster, job), timeout=30, interval=0.2, diagnose=lambda: _diagnose(cluster))
    wait_until("the Workload to be requeued", lambda: (_workload(cluster, job)["status"].get("requeueState") or
                                                     {}).get("count", 0) >= 1, timeout=30)
    cluster.kubectl("delete", job["resource"], job["name"], "--wait=true", timeout=60)


def test_kueue_converts_its_objects_between_api_versions(cluster, queue):
    """The conversion webhook up.sh registers for Kueue's two-version CRDs: the ClusterQueue created
    as v1beta2 reads back as v1beta1 with the same quota."""
    old = cluster.get("clusterqueues.v1beta1.kueue.x-k8s.io", CLUSTER_QUEUE)
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    (flavor,) = old["spec"]["resourceGroups"][0]["flavors"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == QUOTA


@pytest.mark.timeout(180)
def test_run_sh_waits_for_kueue_to_admit_a_queued_job(cluster, queue, build_dir):
    """The lifecycle scripts drive a queued job as any other: run.sh applies it suspended, waits while
    Kueue admits it, streams rank 0 and exits 0 when it completes; clean.sh removes it."""
    prepare(cluster, build_dir, "e2e-kq-run", f"hosts_count={HOSTS}", "local_device_count=1",
            "training.batch_size=64", RESOURCES, f"queue_name={QUEUE}")
    run = start_run(cluster, build_dir)
    code, output = finish(run)
    assert code == 0, output
    assert _true(_workload(cluster, _facts("indexed-job", "e2e-kq-run")), "Finished")  # Kueue ran it
    cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects("e2e-kq-run") == []


@pytest.mark.timeout(180)
def test_run_sh_again_follows_an_admitted_job_without_suspending_it(cluster, queue, build_dir):
    """The build sets suspend: true; applying it again to a job Kueue admitted would stop its pods.
    A second run.sh follows the running job instead, and both see it complete with its first pods."""
    name = "e2e-kq-again"
    prepare(cluster, build_dir, name, f"hosts_count={HOSTS}", "local_device_count=1", "training.batch_size=64",
            RESOURCES, f"queue_name={QUEUE}", f'annotations={{"{RUNNING}": "10s"}}')
    job = _facts("indexed-job", name)
    first = start_run(cluster, build_dir)
    pods = wait_until("the job admitted with its pods", lambda: not _get(cluster, job)["spec"].get("suspend") and
                      len(_pods(cluster, job)) == HOSTS and _pods(cluster, job), timeout=60,
                      diagnose=lambda: _diagnose(cluster))
    code, output = finish(start_run(cluster, build_dir))
    assert code == 0 and "already admitted: following it" in output, output
    code, output = finish(first)
    assert code == 0, output
    assert {p["metadata"]["uid"] for p in _pods(cluster, job)} == {p["metadata"]["uid"] for p in pods}
    assert not _workload(cluster, job)["status"].get("schedulingStats", {}).get("evictions"), "it was stopped"
    cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)


@pytest.mark.parametrize("target", ["indexed-job", "jobset", "trainjob"])
def test_kueue_reads_the_priority_class_and_topology_request(cluster, queue, target, tmp_path):
    """kueue.priority_class and kueue.topology reach Kueue's Workload of each kind: its priority is the
    WorkloadPriorityClass's value and its pod set carries the topology request."""
    apply(cluster, [priority_class("e2e-high", 1000)])
    short = {"indexed-job": "ij", "jobset": "js", "trainjob": "tj"}[target]
    job = _job(cluster, tmp_path / "p", target, f"e2e-kq-{short}-prio", "kueue.priority_class=e2e-high",
               "kueue.topology=kubernetes.io/hostname", "kueue.topology_mode=preferred")
    try:
        wl = wait_until("its Workload", lambda: _workload(cluster, job), timeout=30)
        assert wl["spec"]["priority"] == 1000 and wl["spec"]["priorityClassRef"]["name"] == "e2e-high", wl["spec"]
        (pod_set,) = wl["spec"]["podSets"]
        assert pod_set["count"] == HOSTS
        assert pod_set["topologyRequest"]["preferred"] == "kubernetes.io/hostname", pod_set
    finally:
        cluster.kubectl("delete", job["resource"], job["name"], "--wait=true", timeout=60)
