"""Helpers of the Kubernetes e2e tier: a handle on the test cluster, bounded commands, polling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from generator.engines.kubernetes.policy import release_selector
from tests.support.paths import EXAMPLES_DIR, SCRIPTS_DIR as SCRIPTS
# An image of one's own (scripts/image.sh's repository): run.sh's preflight refuses the default
# reference, which no release has published; kwok pulls nothing, the real-node tier sets its own.
OWN_IMAGE = "localhost/jax-training/trainer"
# kwok (scripts/cluster/kwok/stages.yaml) fails the pod whose index equals this annotation.
FAIL_INDEX = "e2e.jax-training.io/fail-index"
# Keep pods Pending (IP assigned, not ready) this long, so tests can observe that state.
READY_DELAY = "pod-ready.stage.kwok.x-k8s.io/delay"


@dataclass
class Cluster:
    kubeconfig: Path
    namespace: str
    state_dir: Path
    jobset: bool = True
    jaxjob_operator: bool = True
    env: dict = field(default_factory=dict)

    def run(self, args: list, timeout: float = 120, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """Run a command against this cluster (KUBECONFIG set), bounded by `timeout` seconds."""
        proc = subprocess.run([str(a) for a in args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def kubectl(self, *args, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        return self.run(["kubectl", "--namespace", self.namespace, *args], timeout=timeout, check=check)

    def get(self, *args) -> dict:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def items(self, kind: str, selector: str) -> list[dict]:
        return self.get(kind, "-l", selector)["items"]

    def release_objects(self, name: str) -> list[str]:
        """Every object of release `name` still present (what clean.sh must leave empty)."""
        kinds = "jobs.batch,services,pods,networkpolicies.networking.k8s.io"
        kinds += ",jobsets.jobset.x-k8s.io,jaxjobs.kubeflow.org,trainjobs.trainer.kubeflow.org"
        out = self.kubectl("get", kinds, "-l", release_selector(name), "-o", "name").stdout
        return out.split()


def wait_until(what: str, probe: Callable[[], object], timeout: float = 60, interval: float = 0.5,
               diagnose: Callable[[], str] | None = None, run: subprocess.Popen | None = None):
    """Poll `probe` until it returns a truthy value (returned) or fail after `timeout` seconds.
    With `run` (a spawn()ed command the wait depends on), fail at once, with its output, if it ends
    before the probe succeeds: waiting on would only hide why."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except AssertionError as exc:  # a probe may assert; keep its message for the failure
            result, last_error = None, exc
        if result:
            return result
        if run is not None and run.poll() is not None and not probe():  # probed again: it may have ended just now
            code, output = finish(run)
            raise AssertionError(f"{run.args[0]} ended (exit {code}) before {what}:\n{output}")
        time.sleep(interval)
    details = f"\nlast probe error: {last_error}" if last_error else ""
    if diagnose:
        details += "\n" + diagnose()
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{details}")


def prepare(cluster: Cluster, build_dir: Path, name: str, *sets: str,
            base: str = "seed.json", target: str | None = None) -> subprocess.CompletedProcess:
    """scripts/prepare.sh of a variables example into build_dir, in the cluster's namespace."""
    args = [SCRIPTS / "prepare.sh", EXAMPLES_DIR / base, "-o", build_dir,
            "--set", f"name={name}", "--set", f"namespace={cluster.namespace}", "--set", f"image.repository={OWN_IMAGE}"]
    if target:
        args += ["--target", target]
    for s in sets:
        args += [set_option(s), s]
    return cluster.run(args, timeout=60)


def set_option(assignment: str) -> str:
    """--set-json for a JSON object, list, quoted string or non-integer number (Helm's --set types only
    base-10 integers: 0.1 would stay a string); --set for the rest (names, integers, booleans)."""
    try:
        value = json.loads(assignment.partition("=")[2])
    except ValueError:
        return "--set"
    return "--set-json" if isinstance(value, (dict, list, str, float)) else "--set"


def assert_complete(job: dict) -> None:
    """An Indexed Job that succeeded by its success policy: rank 0 succeeded, the job is Complete."""
    true = {c["type"] for c in job["status"].get("conditions", []) if c["status"] == "True"}
    assert {"SuccessCriteriaMet", "Complete"} <= true, job["status"]
    assert "0" in job["status"]["completedIndexes"].replace("-", ",").split(","), job["status"]


def pod_index(pod: dict) -> int:
    labels = pod["metadata"]["labels"]
    index = labels.get("batch.kubernetes.io/job-completion-index",
                       labels.get("training.kubeflow.org/replica-index"))
    return int(index)


def is_ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def environ_for(kubeconfig: Path) -> dict:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(kubeconfig)
    return env


def start_run(cluster: Cluster, build_dir: Path, *extra, timeout: int = 120) -> subprocess.Popen:
    """scripts/run.sh in the background (its own --timeout bounds it)."""
    args = [SCRIPTS / "run.sh", "--timeout", timeout, *extra, build_dir]
    return spawn(cluster, args)


def spawn(cluster: Cluster, args: list) -> subprocess.Popen:
    """A background command in its own process group (so a timeout can end all of it)."""
    return subprocess.Popen([str(a) for a in args], env=cluster.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: int = 150) -> tuple[int, str]:
    """Wait for a spawn()ed command; its exit code and stdout + stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a straggler outside the group still holds the pipes
            out, err = "", ""
        raise AssertionError(f"{proc.args[0]} did not return in {timeout}s\n{out}\n{err}") from None
    return proc.returncode, out + err


def check_pods_while_not_ready(cluster: Cluster, selector: str, hosts: int, hostname: Callable[[int], str],
                               subdomain: str | None, gpu: bool) -> list[dict]:
    """The pods of a starting release: one per index 0..hosts-1, named after `hostname(i)`, on a GPU
    node exactly when `gpu`. With a `subdomain` (the headless Service), each pod's hostname is
    `hostname(i)` under it and the Service's endpoints list the pods while they are still not ready
    (publishNotReadyAddresses). Returns the pods."""
    def pods_with_ip():
        pods = cluster.items("pods", selector)
        if len(pods) == hosts and all(p["status"].get("podIP") for p in pods):
            return pods
        return None

    pods = wait_until(f"{hosts} pods ({selector}) with an IP", pods_with_ip, timeout=60,
                      diagnose=lambda: cluster.kubectl("get", "all,events", check=False).stdout)
    if subdomain:  # first: the pods turn ready READY_DELAY after their IP, and a loaded host is slow
        check_endpoints_of_unready_pods(cluster, selector, subdomain, hosts, hostname)
    assert sorted(pod_index(p) for p in pods) == list(range(hosts))
    nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
    for pod in pods:
        i = pod_index(pod)
        assert pod["metadata"]["name"].startswith(hostname(i)), pod["metadata"]["name"]
        if subdomain:
            assert pod["spec"]["hostname"] == hostname(i)
            assert pod["spec"]["subdomain"] == subdomain
        node = nodes[pod["spec"]["nodeName"]]
        gpus = node["status"]["allocatable"].get("nvidia.com/gpu")
        if gpu:
            assert gpus, f"{pod['metadata']['name']} landed on {node['metadata']['name']}, which has no GPU"
            assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        else:
            assert not gpus, f"a CPU pod landed on GPU node {node['metadata']['name']}"
    return pods


def check_endpoints_of_unready_pods(cluster: Cluster, selector: str, subdomain: str, hosts: int,
                                    hostname: Callable[[int], str]) -> None:
    """The headless Service `subdomain` lists every pod, under its hostname, while none is ready
    (publishNotReadyAddresses): its EndpointSlices read between two reads that both find every pod
    not ready."""
    def endpoints_of_unready_pods():
        before = cluster.items("pods", selector)
        slices = cluster.items("endpointslices", f"kubernetes.io/service-name={subdomain}")
        after = cluster.items("pods", selector)
        if any(is_ready(p) for p in before + after):
            raise AssertionError("pods became ready before the endpoints listed them all")
        listed = {ep["targetRef"]["name"]: ep for s in slices for ep in s.get("endpoints") or []}
        if {p["metadata"]["name"] for p in before} <= set(listed):
            return listed
        return None

    listed = wait_until("the Service's endpoints to list the not-ready pods", endpoints_of_unready_pods,
                        timeout=30, interval=0.3)
    assert {ep.get("hostname") for ep in listed.values()} >= {hostname(i) for i in range(hosts)}
