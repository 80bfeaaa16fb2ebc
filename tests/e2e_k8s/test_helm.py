"""helm install / upgrade / uninstall of charts/jax-training against the real control plane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e_k8s.kube import (READY_DELAY, assert_complete, check_pods_while_not_ready, finish, prepare, spawn,
                                wait_until)
from tests.support.paths import CHART_DIR as CHART, SCRIPTS_DIR


def helm_cmd(helm: Path, cluster, *args) -> list:
    return [helm, *args, "--namespace", cluster.namespace, "--kubeconfig", cluster.kubeconfig]


@pytest.mark.timeout(600)
def test_helm_install_upgrade_uninstall_twice(cluster, helm, tmp_path):
    name = "e2e-helm"
    hosts = 2
    for round_ in range(2):
        build = tmp_path / f"build-{round_}"
        # The merged variables file of prepare.sh is also the chart's values file.
        prepare(cluster, build, name, f"hosts_count={hosts}", f'annotations={{"{READY_DELAY}": "8s"}}')
        values = build / "release" / "values.json"

        install = spawn(cluster, helm_cmd(helm, cluster, "install", name, CHART, "-f", values,
                                          "--wait", "--wait-for-jobs", "--timeout", "2m"))
        check_pods_while_not_ready(cluster, f"batch.kubernetes.io/job-name={name}", hosts,
                                   lambda i: f"{name}-{i}", subdomain=name, gpu=False)
        code, output = finish(install)
        assert code == 0, output
        job = cluster.get("job", name)
        assert_complete(job)
        assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"

        # upgrade: a mutable field of the finished Job changes in place, the release gets revision 2
        cluster.run(helm_cmd(helm, cluster, "upgrade", name, CHART, "-f", values,
                             "--set", "ttl_seconds_after_finished=3600", "--wait", "--timeout", "2m"))
        assert cluster.get("job", name)["spec"]["ttlSecondsAfterFinished"] == 3600
        status = json.loads(cluster.run(helm_cmd(helm, cluster, "status", name, "-o", "json")).stdout)
        assert status["version"] == 2 and status["info"]["status"] == "deployed"
        pods = cluster.items("pods", f"batch.kubernetes.io/job-name={name}")
        assert sorted(p["spec"]["hostname"] for p in pods) == [f"{name}-{i}" for i in range(hosts)]
        assert all(p["status"]["phase"] == "Succeeded" for p in pods)

        cluster.run(helm_cmd(helm, cluster, "uninstall", name, "--cascade", "foreground",
                             "--wait", "--timeout", "2m"))
        wait_until("the release's objects to be gone", lambda: cluster.release_objects(name) == [],
                   timeout=60, diagnose=lambda: "\n".join(cluster.release_objects(name)))
        listed = json.loads(cluster.run(helm_cmd(helm, cluster, "list", "-o", "json")).stdout)
        assert name not in [r["name"] for r in listed]


@pytest.mark.timeout(300)
def test_helm_installs_a_trainjob_on_its_own_runtime(cluster, helm, tmp_path):
    """The TrainingRuntime is a pre-install hook, so the Trainer's webhook finds it when Helm creates
    the TrainJob; Helm leaves hooks behind on uninstall, clean.sh removes the runtime."""
    name, build = "e2e-helm-own", tmp_path / "build"
    prepare(cluster, build, name, "hosts_count=2", f'annotations={{"{READY_DELAY}": "8s"}}',
            "trainjob.own_runtime=true", target="trainjob")
    cluster.run(helm_cmd(helm, cluster, "install", name, CHART, "-f", build / "release" / "values.json",
                         "--timeout", "2m"), timeout=150)
    wait_until(f"the JobSet of TrainJob {name}",
               lambda: cluster.kubectl("get", "jobset", name, "-o", "name", check=False).stdout.strip(), timeout=90)
    runtime = cluster.get("trainingruntime", name)
    assert runtime["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    cluster.run(helm_cmd(helm, cluster, "uninstall", name, "--wait", "--timeout", "2m"), timeout=150)
    assert cluster.kubectl("get", "trainingruntime", name, "-o", "name").stdout.strip()  # a hook: left
    cluster.run([SCRIPTS_DIR / "clean.sh", "--name", name], timeout=150)
    assert cluster.kubectl("get", "trainingruntimes", "-o", "name").stdout.strip() == ""
    assert cluster.release_objects(name) == []
