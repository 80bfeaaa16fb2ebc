"""Two real nodes on this host (scripts/cluster/up.sh --real-nodes 2): each a kubelet with its own
containerd, root dir, cgroup root, bridge and pod subnet, one cluster DNS for both. A 2-host Indexed
Job whose pods may not share a node (a required pod anti-affinity, the `affinity` variable) trains
MNIST with one rank on each node: rank 1 finds rank 0's coordinator through the cluster DNS and the
two train together across the bridges. down.sh then leaves the host as it found it.

The cluster is the test's own (the real nodes' names and addresses are host-wide): the session's
one-node cluster is stopped first when an earlier test started it (fixture no_real_node).
"""

from __future__ import annotations

import ipaddress
import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.e2e_k8s.conftest import NODE_NAMESPACE, _start, _stop
from tests.e2e_k8s.kube import Cluster, assert_complete, environ_for, pod_index, prepare, release_selector, \
    start_run, wait_until
from tests.e2e_k8s.real import HOSTS, MIN_ACCURACY, final_accuracy, host_volume, node_setting, trained
from tests.e2e_k8s.test_node_tier import host_state
from tests.support.paths import MNIST_DIR

NODES = 2


# scripts/image.sh's buildah storage (up.sh builds the trainer image when its sources changed): buildah
# may leave its overlay mounted there, which is the image build's, not the cluster's.
BUILDAH_STORAGE = Path(os.environ.get("JAXT_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                       / "jax-training") / "buildah"


def hosts_state() -> dict:
    """host_state(), with the cgroup roots of nodes 2..N and the fixed device-plugin directory (and
    without the image build's mounts)."""
    state = host_state()
    state["mounts"] = [m for m in state["mounts"] if not m.startswith(f"{BUILDAH_STORAGE}/")]
    state["node_cgroups"] = sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{node_setting('NODE_NAME')}-*"))
    state["var_lib_kubelet"] = Path("/var/lib/kubelet").exists()
    return state


def node_subnet(node: dict) -> ipaddress.IPv4Network:
    """The pod subnet of real node 1 (node.env's POD_SUBNET) or of node i (10.200.<i-1>.0/24)."""
    name = node["metadata"]["name"]
    base = node_setting("NODE_NAME")
    number = 1 if name == base else int(name.removeprefix(f"{base}-"))
    return ipaddress.ip_network(f"10.200.{number - 1}.0/24")


@pytest.mark.timeout(1200)
def test_two_ranks_train_on_two_real_nodes(no_real_node, image, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the real-node tier needs root (containerd, CNI, iptables)")
    before = hosts_state()
    state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-nodes."))
    try:
        kubeconfig = _start(state, NODE_NAMESPACE, "--real-nodes", str(NODES), "--no-controllers")
        cluster = Cluster(kubeconfig=kubeconfig, namespace=NODE_NAMESPACE, state_dir=state,
                          env=environ_for(kubeconfig))
        nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
        base = node_setting("NODE_NAME")
        assert sorted(nodes) == [base] + [f"{base}-{i}" for i in range(2, NODES + 1)], sorted(nodes)
        for node in nodes.values():
            assert "containerd://" in node["status"]["nodeInfo"]["containerRuntimeVersion"]
            assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
        # Each kubelet has its own device-plugin directory: the second one's start did not empty the
        # first one's (the fixed /var/lib/kubelet/device-plugins, which node 2 sees as its own).
        assert Path("/var/lib/kubelet/device-plugins/kubelet.sock").exists()
        assert (state / "node-2" / "device-plugins" / "kubelet.sock").exists()

        host_volume(cluster, "mnist", MNIST_DIR)
        repository, _ = image
        name = "real-nodes"
        apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
             "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": name}}}]}}
        build = tmp_path / "build"
        prepare(cluster, build, name, f"image.repository={repository}", "image.pull_policy=Never",
                "training.epochs=1", "data.download=false",
                'data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}',
                'resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "3Gi"}}',
                f"affinity={json.dumps(apart)}", base="cpu-local.json")
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
    finally:
        _stop(state)
    assert not state.exists()
    assert hosts_state() == before
