"""JAXJob and JobSet renders against the real API server (CRD schemas) and their controllers."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e_k8s.kube import (FAIL_INDEX, READY_DELAY, SCRIPTS, check_pods_while_not_ready, finish,
                                pod_index, prepare, start_run)


def rendered(build, kind: str) -> dict:
    for path in sorted(build.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc["kind"] == kind:
            return doc
    raise AssertionError(f"no {kind} in {build}")


def test_jaxjob_crd_schema_is_enforced(cluster, build_dir):
    """The JAXJob render passes the API server's CRD validation, and that validation has teeth."""
    prepare(cluster, build_dir, "e2e-jaxjob-schema", target="jaxjob")
    cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", build_dir)
    doc = rendered(build_dir, "JAXJob")
    doc["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = "two"
    bad = build_dir.parent / "bad-jaxjob.yaml"
    bad.write_text(yaml.safe_dump(doc))
    proc = cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", bad, check=False)
    assert proc.returncode != 0
    assert "spec.jaxReplicaSpecs.Worker.replicas" in proc.stderr
    # and a field the CRD does not define is refused under strict validation
    doc["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = 2
    doc["spec"]["jaxReplicaSpecs"]["Worker"]["replicaz"] = 2
    bad.write_text(yaml.safe_dump(doc))
    proc = cluster.kubectl("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", bad,
                           check=False)
    assert proc.returncode != 0
    assert ".spec.jaxReplicaSpecs.Worker.replicaz: field not declared in schema" in proc.stderr


@pytest.mark.timeout(300)
def test_jaxjob_runs_under_the_training_operator(cluster, build_dir):
    name = "e2e-jaxjob"
    hosts = 2
    prepare(cluster, build_dir, name, f"hosts_count={hosts}", f'annotations={{"{READY_DELAY}": "8s"}}',
            target="jaxjob")
    run = start_run(cluster, build_dir)
    try:
        pods = check_pods_while_not_ready(
            cluster, f"training.kubeflow.org/job-name={name}", hosts, lambda i: f"{name}-worker-{i}",
            subdomain=None, gpu=False)
        for pod in pods:
            # the operator names pods <name>-worker-<i> and gives each its own Service
            assert pod["metadata"]["name"] == f"{name}-worker-{pod_index(pod)}"
            cluster.get("service", pod["metadata"]["name"])
            names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
            assert len(names) == len(set(names)), f"a variable set twice: {names}"
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            # injected by the operator; of the JAX_* variables our render adds the device count
            # (every target). The port is the one our coordinator listens on (the port named jaxjob-port).
            assert env["COORDINATOR_PORT"] == "1234"
            assert env["NUM_PROCESSES"] == str(hosts)
            assert env["PROCESS_ID"] == pod["metadata"]["labels"]["training.kubeflow.org/replica-index"]
            assert env["COORDINATOR_ADDRESS"].startswith(f"{name}-worker-0")
            # and our coordinator Service's address, which the trainer reads first
            assert {k for k in env if k.startswith("JAX_")} == {"JAX_LOCAL_DEVICE_COUNT", "JAX_COORDINATOR_ADDRESS"}
            assert env["JAX_COORDINATOR_ADDRESS"] == f"{name}-coord:1234"
        code, output = finish(run)
        assert code == 0, output
        assert "succeeded" in output and "kwok: simulated log of a fake pod" in output, output
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects(name) == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fail_index", [None, 1])
def test_jobset_runs_under_the_jobset_controller(cluster, build_dir, fail_index):
    name = "e2e-jobset" if fail_index is None else "e2e-jobset-fail"
    hosts = 2
    annotations = {READY_DELAY: "8s"}
    if fail_index is not None:
        annotations[FAIL_INDEX] = str(fail_index)
    prepare(cluster, build_dir, name, f"hosts_count={hosts}", f"annotations={json.dumps(annotations)}",
            target="jobset")
    run = start_run(cluster, build_dir)
    try:
        check_pods_while_not_ready(cluster, f"jobset.sigs.k8s.io/jobset-name={name}", hosts,
                                   lambda i: f"{name}-worker-0-{i}", subdomain=name, gpu=False)
        code, output = finish(run)
        if fail_index is None:
            assert code == 0, output
            assert "succeeded" in output and "kwok: simulated log of a fake pod" in output, output
        else:
            assert code == 1, output
            assert f"failed index(es): {fail_index}\n" in output, output
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects(name) == []
