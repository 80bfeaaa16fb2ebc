"""The real-node tier itself: scripts/cluster/up.sh --real-node gives a Ready node on containerd, and
down.sh stops it by pid and reverts every change to the host. One real node fits a host: the test
stops the session's node first when an earlier test started it (fixture no_real_node), so it passes
in any order.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import SCRIPTS


def host_state() -> dict:
    """What a real node changes on the host: links, addresses, iptables chains and rules, ipsets (the
    NetworkPolicy firewall's), mounts, kubepods cgroups, ip_forward."""
    def out(*args):
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    return {
        "links": sorted(line.split(":")[1].strip().split("@")[0]
                        for line in out("ip", "-o", "link", "show").splitlines()),
        "addresses": out("ip", "-o", "addr", "show").replace("\\", ""),
        "iptables": {t: out("iptables", "-t", t, "-S") for t in ("filter", "nat", "mangle")},
        "ipsets": out("ipset", "list", "-n") if shutil.which("ipset") else None,
        "mounts": sorted(line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()),
        "kubepods": sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods")),
        "ip_forward": Path("/proc/sys/net/ipv4/ip_forward").read_text(),
        "run_containerd": Path("/run/containerd").exists(),
        "run_node": Path("/run/jax-training-node").exists(),
    }


@pytest.mark.timeout(900)
def test_node_tier_starts_and_leaves_the_host_as_it_was(tmp_path, no_real_node):
    """up.sh --real-node gives a Ready node; down.sh stops it by pid and reverts every host change."""
    if os.geteuid() != 0:
        pytest.skip("the real-node tier needs root")
    before = host_state()
    state = tmp_path / "state"
    up = subprocess.run([str(SCRIPTS / "cluster" / "up.sh"), "--real-node", "--no-controllers",
                         "--state-dir", str(state), "--owner-pid", str(os.getpid())],
                        capture_output=True, text=True, timeout=1800)
    try:
        said = "\n".join(line for line in up.stderr.splitlines() if line.startswith("["))
        assert up.returncode == 0, f"{said}\n{up.stderr[-3000:]}"
        env = dict(os.environ, KUBECONFIG=up.stdout.strip().splitlines()[-1])
        nodes = json.loads(subprocess.run(["kubectl", "get", "nodes", "-o", "json"], env=env, capture_output=True,
                                          text=True, timeout=30, check=True).stdout)["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["jax-training-node"]
        assert "containerd://" in nodes[0]["status"]["nodeInfo"]["containerRuntimeVersion"]
        during = host_state()
        assert during != before  # the probe sees the node's changes, so it can see them left behind
        again = subprocess.run([str(SCRIPTS / "cluster" / "up.sh"), "--real-node", "--state-dir",
                                str(tmp_path / "second")], capture_output=True, text=True, timeout=600)
        assert again.returncode != 0 and "another real node runs on this host" in again.stderr, again.stderr
    finally:
        down = subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], capture_output=True, text=True,
                              timeout=300)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    assert host_state() == before
