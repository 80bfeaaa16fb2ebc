"""The job's NetworkPolicy enforced for real: the package's cluster runs kube-router's firewall for its
two nodes (up.sh --network-policy, scripts/cluster/network-policy.sh). While a 2-host job trains with
one rank on each node, a pod of another namespace on node 2 (one rank shares its node, the other is
across the bridges) cannot reach rank 0's coordinator port; it reaches both ranks' metrics port as the
default `network_policy.metrics_from` (every namespace) says, and neither once the render of
`metrics_from: []` is applied. The host, which the policy leaves alone (kube-router admits a pod's
own node), sees every one of those ports open all along: a refused probe is the policy's doing, not a
port nobody listens on. With the enforcer stopped and its rules removed the coordinator port is
reachable (so the check can fail), and blocked again once it is back. The job then finishes across
the two nodes with the policy on, one rank on each with an address of its node's pod subnet (the
package's one job spread over both nodes: test_two_node_spread.py checks the nodes themselves)."""

from __future__ import annotations

import ipaddress
import json
import socket

import pytest

from tests.e2e_k8s.kube import SCRIPTS, Cluster, assert_complete, pod_index, prepare, release_selector, \
    start_run, wait_until
from tests.e2e_k8s.real import HOSTS, MIN_ACCURACY, final_accuracy, trained
from tests.e2e_k8s.two_nodes.nodes import node_name, node_subnet, one_rank_per_node

OUTSIDER_NAMESPACE = "jax-real-outsider"
CONNECT_TIMEOUT = 2  # seconds: a rejected connection is refused at once, an admitted one accepted


def host_reaches(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=CONNECT_TIMEOUT).close()
        return True
    except OSError:
        return False


class Outsider:
    """A pod of another namespace, on node 2, that opens TCP connections (the trainer image's Python)."""

    def __init__(self, cluster: Cluster, image: str):
        self.cluster = cluster
        cluster.run(["kubectl", "create", "namespace", OUTSIDER_NAMESPACE])
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "outsider", "namespace": OUTSIDER_NAMESPACE},
               "spec": {"nodeName": node_name(2), "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                                        "command": ["sleep", "infinity"]}]}}
        cluster.run(["kubectl", "apply", "-f", "-"], input=json.dumps(pod))

    def kubectl(self, *args, timeout: float = 60):
        return self.cluster.run(["kubectl", "--namespace", OUTSIDER_NAMESPACE, *args], timeout=timeout, check=False)

    def wait_ready(self) -> None:
        ready = self.kubectl("wait", "--for", "condition=Ready", "pod/outsider", "--timeout", "120s", timeout=130)
        assert ready.returncode == 0, ready.stderr + self.kubectl("get", "pod,events", "-o", "wide").stdout

    def refused(self, ip: str, port: int) -> bool:
        """Refused to this pod while the host still reaches the port (the job still runs)."""
        return not self.reaches(ip, port) and host_reaches(ip, port)

    def reaches(self, ip: str, port: int) -> bool:
        code = (f"import socket\ntry: socket.create_connection(({ip!r}, {port}), timeout={CONNECT_TIMEOUT}).close()\n"
                "except OSError: raise SystemExit(1)")
        probe = self.kubectl("exec", "outsider", "--", "python3", "-c", code, timeout=30)
        assert probe.returncode in (0, 1), probe.stderr
        return probe.returncode == 0


def enforcer(cluster: Cluster, action: str) -> None:
    """scripts/cluster/network-policy.sh start or stop (stop also removes its rules and ipsets)."""
    cluster.run([SCRIPTS / "cluster" / "network-policy.sh", action, cluster.state_dir], timeout=120)


@pytest.mark.timeout(900)
def test_network_policy_is_enforced(two_nodes, image, tmp_path):
    cluster, sets = two_nodes
    repository, tag = image
    name = "np"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, one_rank_per_node(name), base="cpu-local.json")
    values = json.loads((build / "release" / "values.json").read_text())
    coordinator, metrics = values["coordinator_port"], values["metrics"]["port"]
    assert values["network_policy"]["metrics_from"] == [{"namespaceSelector": {}}]  # the default
    outsider = Outsider(cluster, f"{repository}:{tag}")
    try:
        run = start_run(cluster, build, timeout=400)
        outsider.wait_ready()

        def listening():  # both ranks up, as the host sees them
            pods = {pod_index(p): p for p in cluster.items("pods", release_selector(name))}
            ips = {i: p["status"].get("podIP") for i, p in pods.items()}
            if len(ips) == HOSTS and all(ips.values()) and host_reaches(ips[0], coordinator) and \
                    all(host_reaches(ip, metrics) for ip in ips.values()):
                return pods
            return None

        pods = wait_until("rank 0's coordinator and both ranks' metrics port listening", listening, timeout=240,
                          run=run, diagnose=lambda: cluster.kubectl("get", "pods,events", "-o", "wide").stdout)
        rank0, rank1 = pods[0]["status"]["podIP"], pods[1]["status"]["podIP"]
        wait_until("the coordinator port closed to another namespace", lambda: outsider.refused(rank0, coordinator),
                   timeout=30)
        assert outsider.reaches(rank0, metrics) and outsider.reaches(rank1, metrics)

        closed = tmp_path / "closed"
        prepare(cluster, closed, name, *sets, one_rank_per_node(name), "network_policy.metrics_from=[]",
                base="cpu-local.json")
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "jax-training",
                        "-f", closed / f"networkpolicy-{name}.yaml")  # as run.sh applies it
        wait_until("the metrics port closed to another namespace (metrics_from: [])",
                   lambda: outsider.refused(rank0, metrics) and outsider.refused(rank1, metrics), timeout=30)

        # The enforcer off: the same probe gets through; back on, it is refused again.
        enforcer(cluster, "stop")
        try:
            assert outsider.reaches(rank0, coordinator)
        finally:
            enforcer(cluster, "start")
        wait_until("the coordinator port closed again with the enforcer back",
                   lambda: outsider.refused(rank0, coordinator), timeout=30)

        output = trained(run)
        assert final_accuracy(output) >= MIN_ACCURACY, output[-3000:]
        assert_complete(cluster.get("job", name))
        # The job spread over the nodes (test_two_node_spread.py's claim): one rank on each, each pod's
        # address in its node's own pod subnet, rank 1 trained with rank 0 across the bridges.
        nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
        assert {p["spec"]["nodeName"] for p in pods.values()} == {node_name(1), node_name(2)}
        for pod in pods.values():
            ip = ipaddress.ip_address(pod["status"]["podIP"])
            assert ip in node_subnet(nodes[pod["spec"]["nodeName"]]), (pod["spec"]["nodeName"], str(ip))
    finally:  # the package's later tests share the cluster
        outsider.kubectl("delete", "namespace", OUTSIDER_NAMESPACE, "--timeout", "60s", timeout=70)
        cluster.run([SCRIPTS / "clean.sh", "--name", name], timeout=150, check=False)
