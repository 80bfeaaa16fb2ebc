"""Helpers of the real-node tests: volumes on the node, running a build to the end, reading results."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.e2e_k8s.kube import SCRIPTS, finish, pod_index, release_selector, start_run
from tests.support.paths import EXAMPLES_DIR, MNIST_DIR, REPO_ROOT

HOSTS = 2
MIN_ACCURACY = 0.97  # one epoch of the default model reaches ~0.974


def host_volume(cluster, name: str, files_from: Path | None = None) -> Path:
    """Claim `name`, bound to a static PersistentVolume on the node's disk (scripts/cluster/host-volume.sh)."""
    args = [SCRIPTS / "cluster" / "host-volume.sh", cluster.state_dir, cluster.namespace, name]
    return Path(cluster.run([*args, *([files_from] if files_from else [])], timeout=180).stdout.strip())


def outputs_volume(cluster, name: str) -> Path:
    """A static PersistentVolume on the node's disk reserved for the claim of job `name`'s outputs
    (rendered with persistence.enabled and storage_class "-"); returns the volume's directory."""
    args = [SCRIPTS / "cluster" / "host-volume.sh", "--no-claim", cluster.state_dir, cluster.namespace,
            f"{name}-outputs"]
    return Path(cluster.run(args, timeout=180).stdout.strip())


# The variables that keep a job's outputs on the volume of outputs_volume().
PERSISTENCE = ("persistence.enabled=true", 'persistence.storage_class="-"')


def assert_results_fetched(build: Path, name: str, output: str) -> dict:
    """run.sh brought the results into a run folder of their own in the build folder (latest names it)
    and printed their summary."""
    results = (build / "results" / name / "latest").resolve()
    summary = json.loads((results / "summary.json").read_text())
    for part in ("metrics.jsonl", "model/model.safetensors", "model/README.md", "curves.png"):
        assert (results / part).is_file(), (part, sorted(str(p) for p in results.rglob("*")))
    assert not (results / "checkpoints").exists()
    assert f"result: test accuracy {summary['test_accuracy']:.4f}" in output, output[-3000:]
    assert f"model:    {results / 'model' / 'model.safetensors'}" in output, output[-3000:]
    return summary


@functools.lru_cache(maxsize=1)
def uninterrupted_accuracy() -> float:
    """The test accuracy of one uninterrupted epoch of the cpu-local example (the settings every real
    run here uses), trained by one local process: the batch order and the averaged gradients do not
    depend on the process count, so 2 pods compute the same parameters."""
    settings = json.loads((EXAMPLES_DIR / "cpu-local.json").read_text())["training"]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "trainer", "train", "--data-dir", str(MNIST_DIR), "--no-download",
                               "--epochs", "1", "--batch-size", str(settings["batch_size"]),
                               "--learning-rate", str(settings["learning_rate"]), "--checkpoint-dir", tmp],
                              capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return final_accuracy(done.stdout)


def final_accuracy(output: str) -> float:
    found = re.findall(r"test accuracy=([0-9.]+)", output)
    assert found, f"no test accuracy in rank 0's log:\n{output[-3000:]}"
    return float(found[-1])


def train(cluster, build: Path, timeout: int = 400, *extra) -> str:
    """scripts/run.sh of a prepared build: exit 0, rank 0's real log streamed; returns the output."""
    return trained(start_run(cluster, build, *extra, timeout=timeout), timeout)


def trained(run, timeout: int = 400) -> str:
    """The end of train()'s run.sh, started with start_run(..., timeout=timeout); the output."""
    code, output = finish(run, timeout=timeout + 60)
    assert code == 0, output[-6000:]
    assert "training completed." in output, output[-3000:]
    # both processes joined rank 0's coordinator, found through the cluster's DNS
    assert f"{HOSTS} global devices" in output, output[-3000:]
    return output


def delete_pod(cluster, name: str, index: int) -> None:
    """`kubectl delete pod` (the default grace period) of process `index` of release `name`."""
    victim = next(p["metadata"]["name"] for p in cluster.items("pods", release_selector(name)) if pod_index(p) == index)
    cluster.kubectl("delete", "pod", victim, "--wait=false")


def node_setting(key: str) -> str:
    """A value of scripts/cluster/node.env, the real node's fixed names and paths."""
    for line in (SCRIPTS / "cluster" / "node.env").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1]
    raise KeyError(key)


def containerd_cli() -> list[str]:
    """ctr talking to the real node's containerd, in the Kubernetes namespace."""
    return ["ctr", "--address", node_setting("CONTAINERD_SOCKET"), "-n", "k8s.io"]


def containerd_task(cluster, pod_prefix: str) -> str:
    """The id of the running `jax` container of the pod whose name starts with pod_prefix."""
    ctr = containerd_cli()
    listed = cluster.run([*ctr, "containers", "ls", "-q",
                          'labels."io.kubernetes.container.name"==jax']).stdout.split()
    for cid in listed:
        info = json.loads(cluster.run([*ctr, "containers", "info", cid]).stdout)
        pod = info["Labels"].get("io.kubernetes.pod.name", "")
        running = cluster.run([*ctr, "tasks", "ls"], check=False).stdout
        if pod.startswith(pod_prefix) and re.search(rf"^{cid}\s+\d+\s+RUNNING", running, re.M):
            return cid
    raise AssertionError(f"no running jax container of a pod {pod_prefix}*: {listed}")
