"""`jaxgen list|status|logs` against the kwok control plane: a job of each Kubernetes kind running at
once (kwok keeps their pods Running), one more waiting in a Kueue queue without quota, and the
installed jaxgen, as a user runs it (KUBECONFIG, --namespace)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.targets import TARGETS
from tests.e2e_k8s.kube import Cluster, pod_index, release_selector, wait_until
from tests.e2e_k8s.kueue import create_queue, delete_queue
from tests.support.paths import EXAMPLES_DIR

JAXGEN = str(Path(sys.executable).with_name("jaxgen"))
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}  # kwok: the pods stay Running
RESOURCES = {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}
KINDS = {name: t.workload.kind for name, t in TARGETS.items() if t.workload}


def jaxgen(cluster: Cluster, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([JAXGEN, *args, "--namespace", cluster.namespace], env=cluster.env, capture_output=True,
                          text=True, timeout=timeout)


def start(cluster: Cluster, target: str, name: str, *sets: str) -> None:
    rendered = subprocess.run(
        [JAXGEN, "render", str(EXAMPLES_DIR / "seed.json"), "--target", target, "--set", f"name={name}",
         "--set", f"namespace={cluster.namespace}", "--set-json", f"annotations={json.dumps(KEEP_RUNNING)}",
         *sets], capture_output=True, text=True, check=True, timeout=60).stdout
    cluster.run(["kubectl", "apply", "--server-side", "-f", "-"], input=rendered)


@pytest.mark.timeout(400)
def test_list_status_and_logs_of_a_job_of_each_kind(cluster):
    names = {target: f"e2e-cmd-{target}" for target in KINDS}
    queued = "e2e-cmd-queued"
    create_queue(cluster, "e2e-cmd-cq", "e2e-cmd-lq", {"cpu": "1", "memory": "1Gi"})  # half the job's: never admitted
    try:
        for target, name in names.items():
            start(cluster, target, name)
        start(cluster, "indexed-job", queued, "--set", "queue_name=e2e-cmd-lq", "--set", "local_device_count=1",
              "--set", "training.batch_size=64", "--set-json", f"resources={json.dumps(RESOURCES)}")

        def all_running():
            proc = jaxgen(cluster, "list", "-o", "json")
            assert proc.returncode == 0, proc.stderr
            rows = [(j["name"], j["kind"], j["phase"]) for j in json.loads(proc.stdout)]
            phases = {name: phase for name, _, phase in rows}
            assert all(phases.get(name) == "Running" for name in names.values()), rows
            return rows
        rows = wait_until("every job Running in jaxgen list", all_running, timeout=180, interval=2)
        # One row per job: no child Job of the JobSet, no JobSet of the TrainJob (both share its name).
        ours = sorted(row for row in rows if row[0] in [*names.values(), queued])
        assert ours == sorted([(name, KINDS[target], "Running") for target, name in names.items()]
                              + [(queued, "Job", "Queued")]), rows

        table = jaxgen(cluster, "list").stdout.splitlines()
        assert table[0].split() == ["NAME", "KIND", "PHASE", "PROGRESS", "ETA", "AGE", "CAUSE"]  # the queued one's
        rows = {line.split()[0]: line.split() for line in table[1:]}
        for target, name in names.items():
            assert rows[name][1:3] == [KINDS[target], "Running"], rows

        for target, name in names.items():
            proc = jaxgen(cluster, "status", name, "-o", "json")
            assert proc.returncode == 0, proc.stderr
            got = json.loads(proc.stdout)
            assert (got["name"], got["kind"], got["phase"]) == (name, KINDS[target], "Running"), got
            assert got["pods"] == "2/2 running" and got["restarts"] == 0, got
            # kwok runs no trainer: no figures, and the results' place from the pod spec
            assert got["results"].startswith(f"/checkpoints/{name} in process 0's pod (an emptyDir"), got
        text = jaxgen(cluster, "status", names["jobset"]).stdout
        assert text.splitlines()[:3] == [f"name:       {names['jobset']} (JobSet)", "phase:      Running",
                                         "pods:       2/2 running"], text

        def held_for_quota():  # Queued all along; why, once Kueue's scheduler has tried it
            waiting = json.loads(jaxgen(cluster, "status", queued, "-o", "json").stdout)
            assert waiting["phase"] == "Queued", waiting
            reason = waiting.get("queue", "")
            return waiting if "insufficient quota" in reason.lower() or "couldn't assign" in reason else None
        waiting = wait_until("Kueue to find no quota for the queued job", held_for_quota, timeout=60, interval=1)
        assert waiting["queue"].startswith("pending in LocalQueue e2e-cmd-lq: "), waiting
        why = waiting["queue"].removeprefix("pending in LocalQueue e2e-cmd-lq: ")
        assert waiting["cause"] == f"waiting in Kueue's ClusterQueue e2e-cmd-cq (LocalQueue e2e-cmd-lq): {why}", waiting
        print(f"cause: {waiting['cause']}")

        for target, name in names.items():
            logs = jaxgen(cluster, "logs", name, "--no-follow")
            assert logs.returncode == 0, logs.stderr
            assert logs.stdout.splitlines()[0].startswith(f"==> pod {name}-") and "(rank 0) <==" in logs.stdout
            assert "kwok: simulated log of a fake pod" in logs.stdout
        rank1 = jaxgen(cluster, "logs", names["indexed-job"], "--rank", "1", "--no-follow").stdout
        assert rank1.startswith(f"==> pod {names['indexed-job']}-1-") and "(rank 1) <==" in rank1, rank1

        missing = jaxgen(cluster, "status", "e2e-cmd-nothing")
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1
        assert "e2e-cmd-nothing: no job of this project by that name" in missing.stderr
    finally:
        for name in [*names.values(), queued]:
            for resource in {t.workload.resource for t in TARGETS.values() if t.workload}:
                cluster.kubectl("delete", resource, "-l", release_selector(name), "--ignore-not-found",
                                "--wait=false", check=False)
        delete_queue(cluster, "e2e-cmd-cq", "e2e-cmd-lq")


KWOK_NODE = "kwok.x-k8s.io/node"  # the annotation of the nodes kwok plays the kubelet of (scripts/cluster/up.sh)


def _lose(cluster: Cluster, node: str) -> None:
    """The node's kubelet dies, as far as the node controller sees: kwok stops renewing its lease and
    status, and its last status says it is not ready, so the node controller taints it at once. (kwok
    still deletes a deleted pod of that node once no finalizer holds it; a Job's pods keep the Job's
    tracking finalizer while the Job runs, so they stay terminating as on a dead kubelet.)"""
    cluster.run(["kubectl", "annotate", "node", node, f"{KWOK_NODE}-"])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime is down",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
    cluster.run(["kubectl", "patch", "node", node, "--subresource=status", "--type=strategic",
                 "-p", json.dumps({"status": {"conditions": [condition]}})])


def _restore(cluster: Cluster, node: str) -> None:
    """kwok plays the node again (Ready), and the node controller takes its taints off."""
    cluster.run(["kubectl", "annotate", "node", node, f"{KWOK_NODE}=fake", "--overwrite"])
    wait_until(f"the node controller to untaint {node}", lambda: not any(
        t["key"].startswith("node.kubernetes.io/") for t in
        cluster.get("node", node).get("spec", {}).get("taints") or []), timeout=90, interval=1)
    # Ready again with its address: the API server reaches kwok through it for the logs of the pods
    # that later tests place on this node (kwok's node-initialize stage once wrote an empty list).
    addresses = cluster.get("node", node)["status"].get("addresses") or []
    assert any(a["type"] == "InternalIP" for a in addresses), f"{node} came back without an InternalIP: {addresses}"


@pytest.mark.timeout(240)
def test_status_names_a_not_ready_node_and_the_ranks_stuck_on_it(cluster):
    """A node of the job goes NotReady and silent: the node controller taints it, the pods'
    toleration (failure.node_lost_seconds=0) lets Kubernetes evict them at once, they stay
    terminating, and jaxgen status names the node, its ranks, and the person's ways out."""
    name = "e2e-cmd-lost"
    start(cluster, "indexed-job", name, "--set", "failure.node_lost_seconds=0")
    node = None
    try:
        def placed():
            pods = cluster.items("pods", release_selector(name))
            return pods if len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods) else None
        pods = wait_until("both pods Running", placed, timeout=90, interval=1)
        node = next(p["spec"]["nodeName"] for p in pods if pod_index(p) == 1)
        ranks = sorted(pod_index(p) for p in pods if p["spec"]["nodeName"] == node)
        _lose(cluster, node)

        def stuck():
            got = json.loads(jaxgen(cluster, "status", name, "-o", "json").stdout)
            return got if any("they are evicted" in line for line in got.get("nodes", [])) else None
        def diagnose():
            nodes = cluster.get("node", node)
            pods = [(p["metadata"]["name"], p["metadata"].get("deletionTimestamp"), p["status"].get("phase"))
                    for p in cluster.items("pods", release_selector(name))]
            return (f"status: {jaxgen(cluster, 'status', name, '-o', 'json').stdout}\nnode {node}: "
                    f"{nodes['status'].get('conditions')} taints {nodes['spec'].get('taints')}\npods: {pods}")
        got = wait_until("jaxgen status to name the evicted ranks", stuck, timeout=90, interval=2, diagnose=diagnose)
        held = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        [line] = got["nodes"]  # NotReady for the status it last posted, or once its lease ran out, for its silence
        assert line.startswith(f"{node} NotReady (container runtime is down): ") or line.startswith(
            f"{node} NotReady (Kubelet stopped posting node status): "), line
        assert line.endswith(
            f": {held} on it; they are evicted but only the node's kubelet can end them: the job waits (the ranks are "
            f"not replaced) until the node is back, or, if it is down for good, until its Node is deleted (kubectl "
            f"delete node {node}) or tainted out of service (kubectl taint node {node} node.kubernetes.io/"
            "out-of-service=nodeshutdown:NoExecute): docs/kubernetes.md, A lost node"), line
        assert got["cause"] == f"node {line.split('; ')[0]}", got  # the cause line: the node and its ranks
        text = jaxgen(cluster, "status", name).stdout.splitlines()
        assert f"node:       {got['nodes'][0]}" in text and f"cause:      {got['cause']}" in text, text
        print(f"cause: {got['cause']}")
        # The Job API allows only podReplacementPolicy Failed with a podFailurePolicy: no second pod of a rank.
        assert sorted(pod_index(p) for p in cluster.items("pods", release_selector(name))) == [0, 1]
    finally:
        if node:
            _restore(cluster, node)
        cluster.kubectl("delete", "jobs.batch,services,networkpolicies", "-l", release_selector(name),
                        "--ignore-not-found", "--wait=false", check=False)
