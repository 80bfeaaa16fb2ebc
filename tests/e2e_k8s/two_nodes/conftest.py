"""One cluster of real nodes for this package (scripts/cluster/up.sh --real-nodes 2, with the
controllers): each node a kubelet with its own containerd, root dir, cgroup root, bridge and pod
subnet, one cluster DNS for both. The real nodes' names and addresses are host-wide, so the
session's one-node cluster is stopped first (the tests after this package start it again); down.sh
then leaves the host as the package found it.

A test that takes a node away (a fault, a drain) gives it back before it ends: the tests after it
share the cluster.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.e2e_k8s.conftest import NODE_NAMESPACE, _start, _stop, real_sets
from tests.e2e_k8s.kube import Cluster, environ_for
from tests.e2e_k8s.real import host_volume
from tests.e2e_k8s.two_nodes.nodes import NODES, hosts_state
from tests.support.paths import MNIST_DIR

# up.sh's options for this package's cluster: one place to add what a test here needs of it.
UP_OPTIONS = ["--real-nodes", str(NODES), "--network-policy"]  # test_network_policy.py: kube-router enforces it


@pytest.fixture(scope="package")
def two_nodes(real_node, image) -> tuple[Cluster, list[str]]:
    """The 2-node cluster with MNIST on a host volume (one host: both nodes mount it), and the
    --set overrides every run here uses."""
    if os.geteuid() != 0:
        pytest.skip("the real-node tier needs root (containerd, CNI, iptables)")
    real_node.stop()
    before = hosts_state()
    state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-nodes."))
    try:
        kubeconfig = _start(state, NODE_NAMESPACE, *UP_OPTIONS)
        cluster = Cluster(kubeconfig=kubeconfig, namespace=NODE_NAMESPACE, state_dir=state,
                          env=environ_for(kubeconfig))
        host_volume(cluster, "mnist", MNIST_DIR)
        yield cluster, real_sets(image)
    finally:
        _stop(state)
    assert not state.exists()
    assert hosts_state() == before
