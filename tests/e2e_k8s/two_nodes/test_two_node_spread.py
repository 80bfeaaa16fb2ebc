"""The hosts of a job spread over the real nodes: a 2-host Indexed Job whose pods may not share a
node (a required pod anti-affinity, the `affinity` variable) trains MNIST with one rank on each node;
rank 1 finds rank 0's coordinator through the cluster DNS and the two train together across the
bridges."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import assert_complete, pod_index, prepare, release_selector, start_run, wait_until
from tests.e2e_k8s.real import HOSTS, MIN_ACCURACY, final_accuracy, trained
from tests.e2e_k8s.two_nodes.nodes import NODES, node_name, node_subnet, one_rank_per_node


@pytest.mark.timeout(900)
def test_two_ranks_train_on_two_real_nodes(two_nodes, tmp_path):
    cluster, sets = two_nodes
    nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
    assert sorted(nodes) == [node_name(i) for i in range(1, NODES + 1)], sorted(nodes)
    for node in nodes.values():
        assert "containerd://" in node["status"]["nodeInfo"]["containerRuntimeVersion"]
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    # Each kubelet has its own device-plugin directory: the second one's start did not empty the
    # first one's (the fixed /var/lib/kubelet/device-plugins, which node 2 sees as its own).
    assert Path("/var/lib/kubelet/device-plugins/kubelet.sock").exists()
    assert (cluster.state_dir / "node-2" / "device-plugins" / "kubelet.sock").exists()

    name = "real-nodes"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, one_rank_per_node(name), base="cpu-local.json")
    run = start_run(cluster, build, timeout=400)

    def placed():
        pods = cluster.items("pods", release_selector(name))
        if len(pods) == HOSTS and all(p["spec"].get("nodeName") and p["status"].get("podIP") for p in pods):
            return {pod_index(p): p for p in pods}
        return None

    pods = wait_until(f"{HOSTS} pods placed, with an IP", placed, timeout=120, run=run,
                      diagnose=lambda: cluster.kubectl("get", "pods,events", "-o", "wide", check=False).stdout)
    output = trained(run)
    assert final_accuracy(output) >= MIN_ACCURACY, output[-3000:]
    assert_complete(cluster.get("job", name))

    # one rank on each node, each with an address of its node's own pod subnet
    placement = {i: pod["spec"]["nodeName"] for i, pod in pods.items()}
    assert len(set(placement.values())) == HOSTS, placement
    for pod in pods.values():
        ip = ipaddress.ip_address(pod["status"]["podIP"])
        assert ip in node_subnet(nodes[pod["spec"]["nodeName"]]), (pod["spec"]["nodeName"], str(ip))
