"""The package's two real nodes: both Ready on containerd, each kubelet with its own device-plugin
directory. A job whose hosts spread over them (a required pod anti-affinity, the `affinity`
variable: one rank on each node, each pod's address in its node's pod subnet, rank 1 joining rank
0's coordinator across the bridges through the cluster DNS) trains to the accuracy in
test_network_policy.py, whose job runs that way: one epoch on these nodes is trained once."""

from __future__ import annotations

from pathlib import Path

from tests.e2e_k8s.two_nodes.nodes import NODES, node_name


def test_two_ready_nodes_on_containerd_each_with_its_own_kubelet_directories(two_nodes):
    cluster, _ = two_nodes
    nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
    assert sorted(nodes) == [node_name(i) for i in range(1, NODES + 1)], sorted(nodes)
    for node in nodes.values():
        assert "containerd://" in node["status"]["nodeInfo"]["containerRuntimeVersion"]
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    # Each kubelet has its own device-plugin directory: the second one's start did not empty the
    # first one's (the fixed /var/lib/kubelet/device-plugins, which node 2 sees as its own).
    assert Path("/var/lib/kubelet/device-plugins/kubelet.sock").exists()
    assert (cluster.state_dir / "node-2" / "device-plugins" / "kubelet.sock").exists()
