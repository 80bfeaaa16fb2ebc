"""Kueue objects and lookups shared by the Kueue tests of both tiers."""

from __future__ import annotations

import yaml

from tests.e2e_k8s.kube import Cluster, wait_until

API = "kueue.x-k8s.io/v1beta2"
FLAVOR = "e2e-flavor"


def apply(cluster: Cluster, documents: list[dict]) -> None:
    cluster.run(["kubectl", "apply", "--server-side", "-f", "-"], input=yaml.safe_dump_all(documents))


def true_condition(obj: dict, condition: str) -> dict | None:
    """The object's condition of that type when it is True."""
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == condition and c["status"] == "True":
            return c
    return None


def create_queue(cluster: Cluster, cluster_queue: str, local_queue: str, quota: dict[str, str],
                 preemption: dict | None = None) -> None:
    """A ResourceFlavor, a ClusterQueue of `quota` (optionally preempting) and a LocalQueue in the
    cluster's namespace; returns once the ClusterQueue is active."""
    spec = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": sorted(quota),
        "flavors": [{"name": FLAVOR, "resources": [
            {"name": name, "nominalQuota": value} for name, value in sorted(quota.items())]}]}]}
    if preemption:
        spec["preemption"] = preemption
    apply(cluster, [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue}, "spec": spec},
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": cluster.namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ])
    wait_until("the ClusterQueue to be active",
               lambda: true_condition(cluster.get("clusterqueue", cluster_queue), "Active"), timeout=30)


def delete_queue(cluster: Cluster, cluster_queue: str, local_queue: str) -> None:
    cluster.kubectl("delete", "localqueue", local_queue, "--wait=false", check=False)
    cluster.kubectl("delete", "clusterqueue", cluster_queue, "resourceflavor", FLAVOR, "--wait=false", check=False)


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def workload_of(cluster: Cluster, resource: str, name: str) -> dict | None:
    """Kueue's Workload of a job (labelled with the job's uid)."""
    uid = cluster.get(resource, name)["metadata"]["uid"]
    found = cluster.items("workloads.kueue.x-k8s.io", f"kueue.x-k8s.io/job-uid={uid}")
    return found[0] if found else None


def diagnose(cluster: Cluster) -> str:
    return cluster.kubectl("get", "workloads.kueue.x-k8s.io,pods", "-o", "wide", check=False).stdout
