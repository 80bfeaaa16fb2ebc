"""One real Kubernetes control plane (scripts/cluster/up.sh) for the whole e2e_k8s tier.

It is stopped at the end of the session whatever happens: by the fixture's finalizer, and, if the
test process is killed, by the cluster's own reaper (up.sh --owner-pid) within seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import SCRIPTS, Cluster, environ_for
from tests.e2e_k8s.real import host_volume
from generator import images
from tests.support.paths import MNIST_DIR
from trainer import __version__

NAMESPACE = "jax-e2e"
NODE_NAMESPACE = "jax-real"
# up.sh builds the binaries when they are not cached yet (a cold build: see tests/e2e_k8s/README.md).
UP_TIMEOUT = int(os.environ.get("JAXT_E2E_UP_TIMEOUT", "2700"))


def _start(state: Path, namespace: str = NAMESPACE, *options: str) -> Path:
    """scripts/cluster/up.sh; one retry, since a free port picked by up.sh can be taken by another
    process before the component binds it (the first failure is still printed)."""
    up = [str(SCRIPTS / "cluster" / "up.sh"), "--state-dir", str(state), "--namespace", namespace,
          "--owner-pid", str(os.getpid()), "--max-lifetime", "3600", "--timeout", "120", *options]
    for attempt in (1, 2):
        try:
            proc = subprocess.run(up, capture_output=True, text=True, timeout=UP_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            _stop(state)
            pytest.fail(f"scripts/cluster/up.sh did not finish in {UP_TIMEOUT}s\n{exc.stderr}")
        if proc.returncode == 0:
            return Path(proc.stdout.strip().splitlines()[-1])
        message = f"scripts/cluster/up.sh failed ({proc.returncode}, attempt {attempt}):\n{proc.stderr[-6000:]}"
        if attempt == 2:
            pytest.fail(message)
        print(message, file=sys.stderr)
        shutil.rmtree(state, ignore_errors=True)
    raise AssertionError("unreachable")


def _stop(state: Path) -> None:
    subprocess.run([str(SCRIPTS / "cluster" / "down.sh"), str(state)], timeout=120, capture_output=True)


@pytest.fixture(scope="session")
def cluster():
    state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-k8s."))
    kubeconfig = _start(state)
    try:
        yield Cluster(kubeconfig=kubeconfig, namespace=NAMESPACE, state_dir=state,
                      env=environ_for(kubeconfig))
    finally:
        _stop(state)


class RealNode:
    """The session's control plane with one real node (containerd, runc, CNI, CoreDNS, a kubelet)
    instead of kwok: its pods run the trainer image for real. One real node fits a host, so it is
    started on first use and stopped at the end of the session, or earlier by a test that needs the
    host without it (the node tier's own start and stop); the next test that uses it starts it again."""

    def __init__(self):
        self.cluster: Cluster | None = None
        self.volumes: set[str] = set()  # host volumes made on this node

    def start(self) -> Cluster:
        if os.geteuid() != 0:
            pytest.skip("the real-node tier needs root (containerd, CNI, iptables)")
        if self.cluster is None:
            state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-node."))
            kubeconfig = _start(state, NODE_NAMESPACE, "--real-node")
            self.cluster = Cluster(kubeconfig=kubeconfig, namespace=NODE_NAMESPACE, state_dir=state,
                                   env=environ_for(kubeconfig))
            self.volumes = set()
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            _stop(cluster.state_dir)


@pytest.fixture(scope="session")
def real_node():
    node = RealNode()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def node_cluster(real_node) -> Cluster:
    return real_node.start()


@pytest.fixture
def no_real_node(real_node) -> None:
    """The host without the session's real node (stopped if a test before started it)."""
    real_node.stop()


@pytest.fixture
def build_dir(tmp_path) -> Path:
    return tmp_path / "build"


@pytest.fixture(scope="session")
def image() -> tuple[str, str]:
    """The trainer image the node imported (scripts/image.sh: built once, cached)."""
    proc = subprocess.run([str(SCRIPTS / "image.sh")], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    repository, tag = proc.stdout.strip().rsplit(":", 1)
    return repository, tag


@pytest.fixture
def real(real_node, image):
    """The node cluster with MNIST on a volume, and the --set overrides every run here uses."""
    node_cluster = real_node.start()
    if "mnist" not in real_node.volumes:
        host_volume(node_cluster, "mnist", MNIST_DIR)
        real_node.volumes.add("mnist")
    return node_cluster, real_sets(image)


def real_sets(image: tuple[str, str]) -> list[str]:
    """The --set overrides of every run on real nodes: the image, one epoch of MNIST from the claim
    `mnist`, resources that fit this host."""
    repository, tag = image
    # The tag is left to its default (the release's version with the accelerator's variant): the one
    # scripts/image.sh builds, which the pods can only start with if the two agree.
    assert tag == f"{__version__}-{images.VARIANTS['cpu']}", tag
    return [f"image.repository={repository}", "image.pull_policy=Never",
            "training.epochs=1", "data.download=false",
            'data.volume={"persistentVolumeClaim": {"claimName": "mnist", "readOnly": true}}',
            # two trainers and the helm test pod fit the node's 2 CPUs
            'resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "3Gi"}}']


@pytest.fixture(scope="session")
def helm() -> Path:
    tools = SCRIPTS / "tools.sh"
    if not tools.exists():
        pytest.skip("scripts/tools.sh (which installs helm) does not exist yet")
    proc = subprocess.run([str(tools)], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    cache = Path(os.environ.get("JAXT_CACHE") or
                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jax-training")
    binary = cache / "bin" / "helm"
    assert binary.exists(), f"scripts/tools.sh did not install {binary}"
    return binary
