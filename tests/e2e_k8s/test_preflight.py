"""`jaxgen check` (and scripts/run.sh, which runs it before it applies): each missing piece on a
control plane started without it (scripts/cluster/up.sh --no-controllers: the CRDs, no controller,
no Kueue, no StorageClass), one line saying what to install or set, exit 2, nothing applied; and
every target all-pass on the tier's complete cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from generator.engines.kubernetes.preflight import COMPONENTS, KUEUE, KUEUE_CONFIG
from generator.targets import KUBERNETES
from tests.e2e_k8s.conftest import _start, _stop
from tests.e2e_k8s.kube import OWN_IMAGE, SCRIPTS, Cluster, environ_for, prepare, release_selector
from tests.support.paths import CRDS_DIR, EXAMPLES_DIR

JAXGEN = str(Path(sys.executable).with_name("jaxgen"))
NAMESPACE = "jax-bare"


@pytest.fixture(scope="module")
def bare():
    state = Path(tempfile.mkdtemp(prefix="jaxt-e2e-bare."))
    kubeconfig = _start(state, NAMESPACE, "--no-controllers")
    try:
        yield Cluster(kubeconfig=kubeconfig, namespace=NAMESPACE, state_dir=state, env=environ_for(kubeconfig))
    finally:
        _stop(state)


def check(cluster: Cluster, target: str, *sets: str, image: bool = True) -> subprocess.CompletedProcess:
    args = [JAXGEN, "check", str(EXAMPLES_DIR / "seed.json"), "--target", target, "--set",
            f"namespace={cluster.namespace}", *(["--set", f"image.repository={OWN_IMAGE}"] if image else [])]
    for assignment in sets:
        args += ["--set-json" if assignment.partition("=")[2][:1] in "{[" else "--set", assignment]
    return subprocess.run(args, env=cluster.env, capture_output=True, text=True, timeout=120)


def errors(proc: subprocess.CompletedProcess, warned: int = 0) -> list[str]:
    """The error lines of a failed check, which also warned `warned` times."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(proc.stderr.splitlines()) - len(lines) == warned, proc.stderr
    assert all(line.startswith("error: ") for line in lines), proc.stderr
    return [line.removeprefix("error: ") for line in lines]


def warnings(proc: subprocess.CompletedProcess) -> list[str]:
    return [line.removeprefix("warning: ") for line in proc.stderr.splitlines() if line.startswith("warning: ")]


def test_a_target_without_its_controller_is_named_with_its_install_command(bare):
    jobset = COMPONENTS["jobset.x-k8s.io"]
    assert errors(check(bare, "jobset")) == [
        f"no JobSet controller: no webhook answers for jobsets.jobset.x-k8s.io: install JobSet {jobset.version}: "
        f"{jobset.install}"]
    operator = COMPONENTS["kubeflow.org"]
    assert errors(check(bare, "jaxjob")) == [
        f"no JAXJob controller: no webhook answers for jaxjobs.kubeflow.org: install {operator.name} "
        f"{operator.version}: {operator.install}"]
    trainjob = errors(check(bare, "trainjob"))
    assert trainjob[0].startswith("no TrainJob controller: ") and "Kubeflow Trainer v2.3.0" in trainjob[0]
    assert trainjob[1].startswith("ClusterTrainingRuntime jax-distributed does not exist: install Kubeflow "
                                  "Trainer's runtimes: kubectl apply --server-side -k"), trainjob


def test_an_api_the_cluster_does_not_serve(bare):
    bare.run(["kubectl", "delete", "crd", "jaxjobs.kubeflow.org", "--wait=true"], timeout=60)
    try:
        operator = COMPONENTS["kubeflow.org"]
        assert errors(check(bare, "jaxjob")) == [
            f"JAXJob (kubeflow.org/v1) is not served by this cluster: install {operator.name} {operator.version}: "
            f"{operator.install}"]
    finally:
        crd = next(p for p in CRDS_DIR.glob("*.yaml")
                   if "jaxjobs.kubeflow.org" in p.read_text())
        bare.run(["kubectl", "apply", "--server-side", "-f", str(crd)], timeout=60)


def test_namespace_admission_queue_storage_gpu_and_image(bare):
    assert errors(check(bare, "indexed-job", "namespace=nowhere")) == [
        "namespace nowhere does not exist: kubectl create namespace nowhere"]
    # PodSecurity "restricted" (up.sh labels the namespace so) refuses a hostPath volume.
    [refused] = errors(check(bare, "indexed-job", 'checkpoint={"volume": {"hostPath": {"path": "/tmp/x"}}}'))
    assert refused.startswith("the pods of jax-training are refused by the cluster: ") and "hostPath" in refused, refused
    assert errors(check(bare, "indexed-job", "queue_name=team-a")) == [
        f"queue_name team-a: Kueue is not installed: install Kueue {KUEUE.version}: {KUEUE.install}"]
    claim = check(bare, "indexed-job", "persistence.enabled=true")
    [no_class] = errors(claim, warned=1)
    assert no_class.startswith("persistence: the cluster has no default StorageClass for the claim jax-training-outputs")
    assert warnings(claim)[0].startswith("persistence: claim jax-training-outputs is ReadWriteOnce and the 2 pods "
                                         "that mount it may land on 2 nodes (kwok-cpu-0, kwok-cpu-1)"), claim.stderr
    assert errors(check(bare, "indexed-job", "persistence.existing_claim=kept", "hosts_count=1",
                        "local_device_count=2")) == [
        f"persistence.existing_claim: PersistentVolumeClaim kept does not exist in namespace {NAMESPACE}: create it, "
        "or leave existing_claim empty to render one"]
    bucket = ["outputs.uri=s3://team-results", "outputs.secret=s3-credentials"]
    assert errors(check(bare, "indexed-job", *bucket)) == [
        f"outputs.secret: Secret s3-credentials does not exist in namespace {NAMESPACE}: kubectl create secret generic "
        "s3-credentials --from-literal=AWS_ACCESS_KEY_ID=… --from-literal=AWS_SECRET_ACCESS_KEY=…"]
    bare.kubectl("create", "secret", "generic", "s3-credentials", "--from-literal=AWS_ACCESS_KEY_ID=k")
    try:
        assert errors(check(bare, "indexed-job", *bucket)) == [
            "outputs.secret: Secret s3-credentials has no key AWS_SECRET_ACCESS_KEY: the pods read the bucket's "
            "credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"]
    finally:
        bare.kubectl("delete", "secret", "s3-credentials")
    gpu_nodes = bare.kubectl("get", "nodes", "-o", "name").stdout.split()
    bare.kubectl("delete", *[n for n in gpu_nodes if "gpu" in n])
    assert errors(check(bare, "indexed-job", "accelerator=gpu", "local_device_count=1",
                        'resources={"limits": {"nvidia.com/gpu": 1}}')) == [
        "accelerator gpu: no node offers nvidia.com/gpu: install the NVIDIA device plugin (or GPU Operator) on the "
        "GPU nodes, or set accelerator=cpu"]
    [image] = errors(check(bare, "indexed-job", image=False))
    assert image == ("image ghcr.io/jax-training/trainer:0.1.0-cpu is not published: build and push it with "
                     "scripts/image.sh --variant cpu --push REGISTRY/jax-training, then set "
                     "image.repository=REGISTRY/jax-training")


def test_run_sh_applies_nothing_when_the_check_fails(bare, tmp_path):
    prepare(bare, tmp_path / "build", "e2e-pre-js", target="jobset")
    run = bare.run([SCRIPTS / "run.sh", "--timeout", "30", tmp_path / "build"], check=False, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert "no JobSet controller" in line and COMPONENTS["jobset.x-k8s.io"].install in line, run.stderr
    assert "applying" not in run.stdout + run.stderr
    assert bare.kubectl("get", "jobsets.jobset.x-k8s.io,pods,services", "-l", release_selector("e2e-pre-js"),
                        "-o", "name").stdout == ""


@pytest.mark.parametrize("target", KUBERNETES)
def test_every_target_passes_on_the_complete_cluster(cluster, target):
    proc = check(cluster, target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{target} jax-training in namespace {cluster.namespace}: ready ("), proc.stdout
    assert proc.stderr == ""


def test_a_read_write_once_claim_on_several_nodes_warns(cluster):
    """Two schedulable CPU nodes (the GPU nodes' taint keeps CPU pods off): a ReadWriteOnce claim that
    two pods mount warns, naming the ways out, and the check passes; a claim every node may mount, one
    pod, or pods pinned to one node by node_selector or by affinity do not warn."""
    for name, mode in (("rwo-outputs", "ReadWriteOnce"), ("rwx-outputs", "ReadWriteMany")):
        cluster.run(["kubectl", "apply", "-f", "-"], input=json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": cluster.namespace},
            "spec": {"accessModes": [mode], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}}))
    try:
        _claims_warn(cluster)
    finally:
        cluster.kubectl("delete", "pvc", "rwo-outputs", "rwx-outputs", "--wait=false")


def _claims_warn(cluster: Cluster) -> None:
    proc = check(cluster, "jobset", "persistence.existing_claim=rwo-outputs")
    assert proc.returncode == 0, proc.stderr
    [line] = warnings(proc)
    assert proc.stderr == f"warning: {line}\n"
    assert line.startswith("persistence: claim rwo-outputs is ReadWriteOnce and the 2 pods that mount it may land on "), line
    assert "kwok-cpu-0" in line and "kwok-cpu-1" in line and "kwok-gpu" not in line, line
    assert line.endswith("pods on a second node stop in a Multi-Attach error; put the outputs in a bucket "
                         "(outputs.uri, and no claim), use a ReadWriteMany class (persistence.access_mode="
                         "ReadWriteMany, persistence.storage_class), or pin the pods to one node (affinity)"), line
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["kwok-cpu-0"]}]}]}}}
    for sets in (["persistence.existing_claim=rwx-outputs"],
                 ["persistence.existing_claim=rwo-outputs", "hosts_count=1", "local_device_count=2"],
                 ["persistence.existing_claim=rwo-outputs", 'node_selector={"kubernetes.io/hostname": "kwok-cpu-1"}'],
                 ["persistence.existing_claim=rwo-outputs", f"affinity={json.dumps(pinned)}"]):
        proc = check(cluster, "jobset", *sets)
        assert (proc.returncode, proc.stderr) == (0, ""), sets


def test_a_missing_local_queue_and_a_disabled_kueue_integration(cluster):
    assert errors(check(cluster, "jobset", "queue_name=nowhere")) == [
        f"queue_name: LocalQueue nowhere does not exist in namespace {cluster.namespace}: create it (kind "
        "LocalQueue, spec.clusterQueue) or set queue_name to one that exists (kubectl get localqueues)"]
    # Upstream's Kueue reads its configuration from this ConfigMap (the test cluster's from a file).
    namespace, name, key = KUEUE_CONFIG
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
              "data": {key: "integrations:\n  frameworks:\n  - batch/job\n"}}
    cluster.run(["kubectl", "apply", "--server-side", "-f", "-"], input=json.dumps(config))
    try:
        problems = errors(check(cluster, "jobset", "queue_name=nowhere"))
        assert problems[1] == ("queue_name: Kueue's integration jobset.x-k8s.io/jobset is not enabled: add it to "
                               f"integrations.frameworks in ConfigMap {namespace}/{name} and restart Kueue"), problems
    finally:
        cluster.run(["kubectl", "delete", "configmap", name, "--namespace", namespace])
