"""What the tests on the real nodes of up.sh --real-nodes N know about them: names, pod subnets, and
the host's state that down.sh must leave as it found it."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from tests.e2e_k8s.real import node_setting
from tests.e2e_k8s.test_node_tier import host_state

NODES = 2

# scripts/image.sh's buildah storage (up.sh builds the trainer image when its sources changed): buildah
# may leave its overlay mounted there, which is the image build's, not the cluster's.
BUILDAH_STORAGE = Path(os.environ.get("JAXT_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                       / "jax-training") / "buildah"


def node_name(number: int) -> str:
    """Real node 1 is NODE_NAME (node.env), node i is NODE_NAME-i."""
    base = node_setting("NODE_NAME")
    return base if number == 1 else f"{base}-{number}"


def node_number(name: str) -> int:
    base = node_setting("NODE_NAME")
    return 1 if name == base else int(name.removeprefix(f"{base}-"))


def node_subnet(node: dict) -> ipaddress.IPv4Network:
    """The pod subnet of real node i: 10.200.<i-1>.0/24 (node.env's POD_SUBNET for node 1)."""
    return ipaddress.ip_network(f"10.200.{node_number(node['metadata']['name']) - 1}.0/24")


def one_rank_per_node(name: str) -> str:
    """The `affinity` --set that keeps the pods of job `name` on different nodes (a required pod
    anti-affinity on kubernetes.io/hostname)."""
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": name}}}]}}
    return f"affinity={json.dumps(apart)}"


def hosts_state() -> dict:
    """host_state(), with the cgroup roots of nodes 2..N and the fixed device-plugin directory (and
    without the image build's mounts)."""
    state = host_state()
    state["mounts"] = [m for m in state["mounts"] if not m.startswith(f"{BUILDAH_STORAGE}/")]
    state["node_cgroups"] = sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{node_setting('NODE_NAME')}-*"))
    state["var_lib_kubelet"] = Path("/var/lib/kubelet").exists()
    return state
