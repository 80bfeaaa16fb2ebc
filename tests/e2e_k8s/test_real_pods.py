"""The main path in real containers: the trainer image (scripts/image.sh) in pods on a real kubelet.

Every target trains MNIST in 2 real pods under PodSecurity "restricted", finding rank 0 through the
cluster's DNS; the chart's `helm test` reaches the live coordinator; a worker killed mid-training
is replaced by the job's own failure policy and both ranks resume from the last checkpoint.
MNIST reaches the pods on a read-only volume (a static PersistentVolume holding ../shared/data/mnist).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.e2e_k8s import kubeflow_sdk
from tests.e2e_k8s.kube import (SCRIPTS, assert_complete, finish, prepare, release_selector, start_run,
                                wait_until)
from tests.e2e_k8s.real import (HOSTS, MIN_ACCURACY, PERSISTENCE, assert_results_fetched, containerd_cli,
                                 containerd_task, final_accuracy, outputs_volume, train, trained)
from generator.engines.kubernetes.checks import EMPTYDIR_WARNING
from generator.targets import KUBERNETES, TARGETS
from tests.support.examples import target_of
from tests.support.paths import EXAMPLES_DIR, REPO_ROOT
from tests.e2e_k8s.test_helm import CHART, helm_cmd
from trainer import __version__, models

# Accuracies of uninterrupted runs, by configuration, for the fault test to compare with.
UNINTERRUPTED: dict[str, float] = {}
SHORT_RUN_EXAMPLES = 6400  # 50 steps of cpu-local.json's batch: a run whose accuracy nothing asserts


def test_the_namespace_enforces_restricted(real):
    cluster, _ = real
    labels = cluster.get("namespace", cluster.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.timeout(900)
def test_indexed_job_prepare_run_clean_twice(real, tmp_path):
    cluster, sets = real
    name = "real-job"
    for round_ in range(2):
        build = tmp_path / f"build-{round_}"
        # The first cycle trains the epoch to the accuracy; the second, which shows that the first left
        # nothing behind, trains a tenth of it (50 steps).
        short = [] if round_ == 0 else [f"training.train_examples={SHORT_RUN_EXAMPLES}"]
        prepared = prepare(cluster, build, name, *sets, *short, base="cpu-local.json")
        assert f"warning: {EMPTYDIR_WARNING}" in prepared.stderr  # the default keeps nothing
        run = start_run(cluster, build, timeout=400)
        if round_ == 0:  # `jaxgen status` while it trains: progress and an ETA read from rank 0's metrics
            during = wait_until("jaxgen status with an ETA", lambda: _status_with_eta(cluster, name), timeout=300,
                                interval=1, run=run)
            assert during["phase"] == "Running" and 0 < during["step"] < during["total_steps"], during
        output = trained(run)
        accuracy = final_accuracy(output)
        assert round_ == 1 or accuracy >= MIN_ACCURACY, output[-3000:]
        # What is left of an emptyDir run: rank 0's termination message, and the plain truth.
        assert f"rank 0: result: test accuracy {accuracy:.4f}" in output, output[-3000:]
        assert "the job's outputs were on an emptyDir and are gone with its pods" in output
        UNINTERRUPTED.setdefault("1 epoch", accuracy)
        assert_complete(cluster.get("job", name))

        # A finished job is not applied again by accident.
        code, again = finish(start_run(cluster, build, "--no-logs"))
        assert code == 2, again
        assert "already finished" in again and "--replace" in again

        if round_ == 0:  # and once it has finished: the result, and where the outputs were
            after = _status(cluster, name)
            assert after["phase"] == "Succeeded" and after["result"].startswith(f"test accuracy {accuracy:.4f}"), after
            assert after["results"].endswith("(an emptyDir: lost with the pod)"), after

        cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
        assert cluster.release_objects(name) == []


def _status(cluster, name: str) -> dict:
    """`jaxgen status NAME -o json`, as a user runs it against the cluster."""
    proc = subprocess.run([sys.executable, "-m", "generator", "status", name, "--namespace", cluster.namespace,
                           "-o", "json"], cwd=REPO_ROOT, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _status_with_eta(cluster, name: str) -> dict | None:
    status = _status(cluster, name)
    return status if status.get("eta_seconds") else None


# The columns that show a TrainJob's progress, as docs/kubernetes.md documents them (Trainer v2.3's own
# columns are its state and age).
PROGRESS_COLUMNS = re.search(r"kubectl get trainjob NAME -o custom-columns='([^']+)'",
                             (REPO_ROOT / "docs" / "kubernetes.md").read_text())[1]


def progress_shown(cluster, name: str, run) -> str | None:
    """`kubectl get trainjob` with the progress columns, once it shows a run under way (between 1
    and 99 %, a remaining time, the loss); None before."""
    if run.poll() is not None:
        code, output = finish(run)
        pytest.fail(f"run.sh ended ({code}) before any progress showed:\n{output[-3000:]}")
    table = cluster.kubectl("get", "trainjob", name, "-o", f"custom-columns={PROGRESS_COLUMNS}").stdout
    row = dict(zip(*(line.split() for line in table.splitlines())))
    if not row.get("PROGRESS", "<none>").isdigit() or not 1 <= int(row["PROGRESS"]) <= 99:
        return None
    return table if row["ETA-SECONDS"].isdigit() and "loss" in row["METRICS"].split(",") else None


@pytest.mark.timeout(900)
# Every Kubernetes target beside the one test_indexed_job_prepare_run_clean_twice trains (cpu-local.json's).
@pytest.mark.parametrize("target", [name for name in KUBERNETES if name != target_of(EXAMPLES_DIR / "cpu-local.json")])
def test_operator_targets_train(real, tmp_path, target):
    """Each target trains; a TrainJob's progress shows in `kubectl get trainjob` while it trains
    (the Trainer's status server, which the test cluster turns on), and is complete once it is done;
    the Kubeflow SDK's TrainerClient lists it, gets it, reads its logs and waits for it."""
    cluster, sets = real
    name = f"real-{target}"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, base="cpu-local.json", target=target)
    run = start_run(cluster, build, timeout=400)
    try:
        if target == "trainjob":
            print(wait_until("progress in `kubectl get trainjob`", lambda: progress_shown(cluster, name, run),
                             timeout=300, interval=1,
                             diagnose=lambda: cluster.kubectl("get", "trainjob", name, "-o", "yaml").stdout))
            kubeflow_sdk.assert_running(kubeflow_sdk.trainer_client(cluster), name)
        output = trained(run)
    finally:
        if run.poll() is None:
            run.kill()
    assert final_accuracy(output) >= MIN_ACCURACY, output[-3000:]
    if target == "trainjob":
        job = cluster.get("trainjob", name)
        status = job["status"]["trainerStatus"]
        assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (100, 0), status
        metrics = {m["name"]: m["value"] for m in status["metrics"]}
        assert metrics["test_accuracy"] == f"{final_accuracy(output):.4f}", status
        # real_sets' limits name no cpu: the render's take requests.cpu, the device the SDK reads
        cpu = job["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"]
        kubeflow_sdk.assert_finished(kubeflow_sdk.trainer_client(cluster), name, HOSTS, cpu, "training completed.")
    # `jaxgen status` and `jaxgen logs` of the finished job, whatever its kind
    after = _status(cluster, name)
    assert after["phase"] == "Succeeded" and after["result"].startswith(f"test accuracy {final_accuracy(output):.4f}")
    logs = subprocess.run([sys.executable, "-m", "generator", "logs", name, "--namespace", cluster.namespace],
                          cwd=REPO_ROOT, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0 and "training completed." in logs.stdout, logs.stdout[-3000:] + logs.stderr
    hosts = TARGETS[target].workload.hosts
    if hosts.service:  # the processes met through the render's coordinator Service (the cluster's kube-proxy)
        assert f"coordinator {hosts.coordinator(name)}:" in logs.stdout, logs.stdout[-3000:]
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    assert cluster.release_objects(name) == []


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("model", [m for m in models.NAMES if m != models.DEFAULT])
def test_indexed_job_trains_every_other_model(real, tmp_path, model):
    """Each registered model besides the default, selected by training.model, trains in the Indexed
    Job's 2 pods (one epoch, at the trainer's default learning rate: the accuracy tier's)."""
    cluster, sets = real
    name = f"real-{model}"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, f"training.model={model}", "training.learning_rate=0.1",
            base="cpu-local.json")
    rendered = "".join(p.read_text() for p in build.rglob("*.yaml"))
    assert f"--{model}-" in rendered  # its own settings reach the pods
    output = train(cluster, build, 1200)
    assert final_accuracy(output) >= MIN_ACCURACY, output[-3000:]
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    assert cluster.release_objects(name) == []


@pytest.mark.timeout(900)
def test_helm_install_trains_and_helm_test_reaches_the_coordinator(real, helm, tmp_path):
    cluster, sets = real
    name = "real-helm"
    volume = outputs_volume(cluster, name)
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, *PERSISTENCE, base="cpu-local.json")
    values = build / "release" / "values.json"
    # What a user installs: the chart as `helm package` builds it.
    package = cluster.run(helm_cmd(helm, cluster, "package", CHART, "--destination", tmp_path), timeout=60)
    [archive] = tmp_path.glob("jax-training-*.tgz")
    assert archive.name == f"jax-training-{__version__}.tgz", package.stdout
    cluster.run(helm_cmd(helm, cluster, "install", name, archive, "-f", values), timeout=120)
    try:
        # The test pod connects to rank 0's coordinator while the job trains.
        test = cluster.run(helm_cmd(helm, cluster, "test", name, "--logs", "--timeout", "5m"), timeout=360,
                           check=False)
        assert test.returncode == 0, test.stdout + test.stderr
        assert "accepts connections" in test.stdout
        cluster.kubectl("wait", "--for=condition=Complete", f"job/{name}", "--timeout=400s", timeout=420)
        rank0 = cluster.items("pods", f"batch.kubernetes.io/job-name={name},"
                                      "batch.kubernetes.io/job-completion-index=0")
        log = cluster.kubectl("logs", rank0[0]["metadata"]["name"], "-c", "jax").stdout
        assert final_accuracy(log) >= MIN_ACCURACY, log[-3000:]
        # The results are on the release's claim, and its termination message says how it ended.
        summary = json.loads((volume / name / "summary.json").read_text())
        assert summary["test_accuracy"] == final_accuracy(log)
        message = rank0[0]["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        assert message.startswith(f"result: test accuracy {summary['test_accuracy']:.4f}"), message
    finally:
        uninstall = cluster.run(helm_cmd(helm, cluster, "uninstall", name, "--wait", "--timeout", "2m"), timeout=180)
    wait_until("the release's pods to go", lambda: not cluster.items("pods", release_selector(name)), timeout=120)
    # helm uninstall keeps the claim and its results (helm.sh/resource-policy: keep), and says so.
    said = uninstall.stdout + uninstall.stderr
    assert "kept due to the resource policy" in said and f"{name}-outputs" in said, said
    assert [c["metadata"]["name"] for c in cluster.items("persistentvolumeclaims", release_selector(name))] == [
        f"{name}-outputs"]
    cluster.kubectl("delete", "pvc", f"{name}-outputs", "--wait=true", timeout=120)


@pytest.mark.timeout(1200)
def test_killed_worker_resumes_from_the_last_checkpoint(real, tmp_path):
    cluster, sets = real
    name = "real-fault"
    checkpoints = outputs_volume(cluster, name) / name / "checkpoints"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, "backoff_limit=1", "checkpoint.every_steps=100", *PERSISTENCE,
            base="cpu-local.json")
    run = start_run(cluster, build, timeout=600)
    try:
        wait_until("a checkpoint of step 200", lambda: any(checkpoints.glob("*200*")), timeout=300,
                   interval=0.5, run=run, diagnose=lambda: "\n".join(str(p) for p in checkpoints.parent.rglob("*")))
        task = containerd_task(cluster, f"{name}-1-")
        cluster.run([*containerd_cli(), "tasks", "kill", "--signal", "SIGKILL", task])
        code, output = finish(run, timeout=660)
    finally:
        if run.poll() is None:
            run.kill()
    assert code == 0, output[-6000:]
    resumed = re.findall(r"resuming from the checkpoint of step (\d+)", output)
    assert resumed and int(resumed[-1]) >= 200, output[-6000:]
    job = cluster.get("job", name)
    assert job["status"].get("failed", 0) >= 1  # the kill really failed a pod, the job retried
    accuracy = final_accuracy(output)
    if "1 epoch" not in UNINTERRUPTED:  # run alone: the uninterrupted run is measured here
        prepare(cluster, tmp_path / "plain", "real-plain", *sets, base="cpu-local.json")
        UNINTERRUPTED["1 epoch"] = final_accuracy(train(cluster, tmp_path / "plain"))
        cluster.run([SCRIPTS / "clean.sh", tmp_path / "plain"], timeout=180)
    assert abs(accuracy - UNINTERRUPTED["1 epoch"]) <= 0.003, (accuracy, UNINTERRUPTED)
    summary = assert_results_fetched(build, name, output)
    assert summary["test_accuracy"] == accuracy and summary["restarts"] >= 1
    cleaned = cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
    assert f"kept persistentvolumeclaim/{name}-outputs (the job's outputs)" in cleaned.stderr
    assert cluster.items("persistentvolumeclaims", release_selector(name))  # the results stay
    cluster.run([SCRIPTS / "clean.sh", "--delete-outputs", build], timeout=180)
    assert not cluster.items("persistentvolumeclaims", release_selector(name))


@pytest.mark.timeout(300)
def test_an_image_the_node_cannot_get_fails_run_at_once(real, tmp_path):
    cluster, sets = real
    name = "real-no-image"
    build = tmp_path / "build"
    prepare(cluster, build, name, *sets, "image.repository=localhost/jax-training/not-built", base="cpu-local.json")
    code, output = finish(start_run(cluster, build, timeout=240), timeout=280)
    assert code == 1, output
    assert "cannot start: ErrImageNeverPull" in output and "scripts/image.sh" in output, output
    cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
