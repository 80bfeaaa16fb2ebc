"""prepare.sh → run.sh → clean.sh of the Indexed Job target against the real control plane."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e_k8s.kube import (FAIL_INDEX, READY_DELAY, SCRIPTS, assert_complete, check_pods_while_not_ready,
                                finish, prepare, start_run)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("accelerator", ["cpu", "gpu"])
def test_prepare_run_clean_twice(cluster, tmp_path, accelerator):
    name = f"e2e-{accelerator}"
    hosts = 2
    for round_ in range(2):  # the whole cycle twice in a row: nothing may be left over
        build = tmp_path / f"build-{round_}"
        prepare(cluster, build, name, f"hosts_count={hosts}", f"accelerator={accelerator}",
                f'annotations={{"{READY_DELAY}": "8s"}}')
        run = start_run(cluster, build)
        pods = check_pods_while_not_ready(
            cluster, f"batch.kubernetes.io/job-name={name}", hosts, lambda i: f"{name}-{i}",
            subdomain=name, gpu=accelerator == "gpu")
        for pod in pods:
            env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
            assert env["JAX_COORDINATOR_ADDRESS"]["value"] == f"{name}-0.{name}:1234"
            assert env["JAX_NUM_PROCESSES"]["value"] == str(hosts)
        code, output = finish(run)
        assert code == 0, output
        assert "succeeded" in output
        # rank 0's log, served by kwok for the fake pod through the API server
        assert "kwok: simulated log of a fake pod" in output
        assert_complete(cluster.get("job", name))

        # run.sh again on the finished job: refused (nothing applied) unless --replace re-runs it
        code, output = finish(start_run(cluster, build, "--no-logs"))
        assert code == 2, output
        assert "already finished (Complete)" in output and "--replace" in output
        uid = cluster.get("job", name)["metadata"]["uid"]
        code, output = finish(start_run(cluster, build, "--no-logs", "--replace"))
        assert code == 0, output
        assert cluster.get("job", name)["metadata"]["uid"] != uid

        cluster.run([SCRIPTS / "clean.sh", build], timeout=120)
        assert cluster.release_objects(name) == []
        again = cluster.run([SCRIPTS / "clean.sh", build], timeout=60)
        assert "nothing to delete" in again.stderr


@pytest.mark.timeout(300)
# The failing index is rank 0: the job succeeds when rank 0 does (its success policy), and kwok,
# unlike JAX, would let rank 0 finish while a peer fails.
@pytest.mark.parametrize("backoff_limit", [0, 1])
def test_failed_index_fails_run(cluster, build_dir, backoff_limit):
    fail_index = 0
    name = f"e2e-fail-{backoff_limit}"
    prepare(cluster, build_dir, name, "hosts_count=2", f"backoff_limit={backoff_limit}",
            f'annotations={{"{FAIL_INDEX}": "{fail_index}"}}')
    try:
        code, output = finish(start_run(cluster, build_dir))
        assert code == 1, output
        assert "FAILED" in output and "BackoffLimitExceeded" in output
        assert f"failed index(es): {fail_index}\n" in output, output
        assert f"index {1 - fail_index} (" not in output
        # The failure policy decides when the job fails: every allowed retry happened first. (A peer
        # still running when the job fails is terminated by the Job controller, and may count too.)
        job = cluster.get("job", name)
        assert job["spec"]["backoffLimit"] == backoff_limit * 2  # per-pod retries for the whole job
        assert job["spec"]["backoffLimit"] + 1 <= job["status"]["failed"] <= job["spec"]["backoffLimit"] + 2, \
            job["status"]
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects(name) == []


@pytest.mark.timeout(120)
def test_run_times_out_with_diagnostics(cluster, build_dir):
    name = "e2e-unschedulable"
    prepare(cluster, build_dir, name, 'node_selector={"e2e.jax-training.io/no-such-node": "x"}')
    try:
        proc = subprocess.run([str(SCRIPTS / "run.sh"), "--timeout", "5", "--no-logs", str(build_dir)],
                              env=cluster.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 124, proc.stderr
        assert "timed out after 5s" in proc.stderr
        assert "Pending" in proc.stderr  # the pods' state is printed
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)


def test_namespace_enforces_restricted(cluster):
    """The pods above were admitted under PodSecurity "restricted", which is really enforced."""
    ns = cluster.get("namespace", cluster.namespace)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # A pod with no security context at all is fine under "baseline", refused under "restricted".
    proc = cluster.kubectl("run", "psa-probe", "--image", "busybox", "--dry-run=server", check=False)
    assert proc.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in proc.stderr
    assert "runAsNonRoot" in proc.stderr


def test_lifecycle_scripts_reject_bad_usage(cluster, tmp_path):
    for script in ("run.sh", "clean.sh"):
        proc = cluster.run([SCRIPTS / script, tmp_path / "missing"], check=False, timeout=30)
        assert proc.returncode != 0
        assert "prepare" in proc.stderr  # tells how to make the build folder
    proc = cluster.run([SCRIPTS / "run.sh", "--timeout", "soon", tmp_path], check=False, timeout=30)
    assert proc.returncode == 2 and "--timeout" in proc.stderr
    proc = cluster.run([SCRIPTS / "prepare.sh", "-o", tmp_path / "b", "--set", "hosts_count=0",
                        SCRIPTS.parent / "variables" / "examples" / "seed.json"], check=False, timeout=30)
    assert proc.returncode == 2 and "hosts_count" in proc.stderr
    assert not (tmp_path / "b").exists()


def test_scripts_honour_kubeconfig_context_and_namespace(cluster, tmp_path, build_dir):
    """No KUBECONFIG in the environment and no ~/.kube/config: only the options say where to go."""
    env = {k: v for k, v in cluster.env.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)
    where = ["--kubeconfig", str(cluster.kubeconfig), "--context", "jaxt-e2e"]

    def script(*args):
        return subprocess.run([str(SCRIPTS / args[0]), *map(str, args[1:])], env=env, capture_output=True,
                              text=True, timeout=60)

    proc = script("clean.sh", *where, "--namespace", "kube-system", "--name", "absent")
    assert proc.returncode == 0, proc.stderr
    assert "in namespace kube-system" in proc.stderr
    proc = script("clean.sh", "--kubeconfig", cluster.kubeconfig, "--context", "no-such-context",
                  "--name", "absent")
    assert proc.returncode != 0
    prepare(cluster, build_dir, "e2e-options")
    proc = script("run.sh", *where, "--no-logs", "--timeout", "60", build_dir)
    try:
        assert proc.returncode == 0, proc.stderr
    finally:
        assert script("clean.sh", *where, build_dir).returncode == 0
    # a namespace that contradicts the rendered objects is refused before anything is created
    proc = script("run.sh", *where, "--namespace", "kube-system", "--timeout", "10", build_dir)
    assert proc.returncode != 0 and "namespace" in proc.stderr
    assert cluster.release_objects("e2e-options") == []
