"""A TrainJob (Kubeflow Trainer v2) on the jax-distributed ClusterTrainingRuntime, run by the real
Trainer v2 controller (scripts/cluster/up.sh) through the JobSet controller to kwok's pods: what the
runtime does with a minimal TrainJob (the contract the `trainjob` target relies on), then the
`trainjob` render itself through prepare.sh, run.sh and clean.sh.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from generator.targets import TARGETS
from trainer import __version__, trainjob_status
from generator.engines.kubernetes.policy import COMPLETION_INDEX_FIELD as COMPLETION_INDEX, DNS_LABEL_MAX, JOBSET_FAILURE_RULES, RUN_AS_ID
from tests.e2e_k8s.kube import (READY_DELAY, SCRIPTS, check_pods_while_not_ready, finish, prepare, start_run,
                                wait_until)

RUNTIME = "jax-distributed"
# What the runtime's JAX plugin (pkg/runtime/framework/plugins/jax in kubeflow/trainer v2.3.0)
# injects into the trainer container: the contract trainer/cluster.py reads.
JAX_PORT = TARGETS["trainjob"].workload.engine_port
# The JobSet webhook refuses a JobSet whose longest pod name, <name>-node-0-<nodes-1>-abcde, passes
# 63 characters; the TrainJob itself is admitted and then never runs. With 2 nodes: 48.
MAX_NAME_2_NODES = DNS_LABEL_MAX - len("-node-0-1-abcde")


STATUS_ENV = (trainjob_status.ENV_URL, trainjob_status.ENV_CA_CERT, trainjob_status.ENV_TOKEN)


def check_status_server_env(pod: dict, env: dict, namespace: str, name: str) -> None:
    """The status plugin's variables: this TrainJob's status URL, and the CA and token files of a
    projected volume whose token is for this TrainJob's status only (its audience)."""
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"
    assert re.fullmatch(rf"https://[a-z0-9.-]+\.svc:[0-9]+{re.escape(path)}", env[trainjob_status.ENV_URL]["value"])
    [container] = pod["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    ca_dir, token_dir = (env[v]["value"].rsplit("/", 1)[0] for v in STATUS_ENV[1:])
    assert ca_dir == token_dir and ca_dir in mounts, (env, mounts)
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == mounts[ca_dir]]
    [token] = [s["serviceAccountToken"] for s in volume["projected"]["sources"] if "serviceAccountToken" in s]
    assert token["audience"] == "trainer.kubeflow.org" + path.removeprefix("/apis/trainer.kubeflow.org")


def trainjob(name: str, namespace: str, nodes: int, runtime: str = RUNTIME) -> dict:
    """A minimal TrainJob; the runtime patch adds what PodSecurity "restricted" requires (the
    upstream runtime's pod template has no security context) and kwok's readiness delay."""
    pod_spec = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_ID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "node", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": nodes,
                "image": f"localhost/jax-training/trainer:{__version__}-cpu",
                "command": ["python", "-m", "trainer"],
                "resourcesPerNode": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            },
            "runtimePatches": [{
                "manager": "jax-training.io/e2e",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {"spec": {"template": {
                        "metadata": {"annotations": {READY_DELAY: "8s"}},
                        "spec": pod_spec,
                    }}},
                }]}}},
            }],
        },
    }


def apply(cluster, doc: dict, check: bool = True):
    return cluster.run(["kubectl", "--namespace", cluster.namespace, "apply", "--server-side", "-f", "-"],
                       input=yaml.safe_dump(doc), check=check)


def condition(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def test_runtime_installed_and_webhook_live(cluster):
    """up.sh installed the jax-distributed runtime of ../shared/crds, and the controller's
    validating webhook admits TrainJobs: one whose runtime patch sets env on the runtime's node
    container (the runtime's JAX plugin owns it) is refused. A rule of the Trainer's own: Kueue's
    TrainJob webhook, called in parallel, refuses a missing runtime too, so that refusal could come
    from either."""
    runtime = cluster.get("clustertrainingruntime", RUNTIME)
    assert runtime["spec"]["mlPolicy"]["jax"] == {}
    bad = trainjob("e2e-trainjob-bad", cluster.namespace, 2)
    patch = bad["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    patch["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "EXTRA", "value": "1"}]
    proc = apply(cluster, bad, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "validator.trainjob.trainer.kubeflow.org" in proc.stderr, proc.stderr
    assert "must not have envs for the" in proc.stderr, proc.stderr


@pytest.mark.timeout(300)
def test_trainjob_runs_as_a_jobset_with_the_jax_env(cluster):
    nodes = 2
    name = "e2e-trainjob-".ljust(MAX_NAME_2_NODES, "x")  # the longest that runs: pod names of 63
    apply(cluster, trainjob(name, cluster.namespace, nodes))
    try:
        jobset = wait_until("the controller's JobSet", lambda: json.loads(cluster.kubectl(
            "get", "jobsets.jobset.x-k8s.io", name, "--ignore-not-found", "-o", "json").stdout or "null"),
            timeout=60, diagnose=lambda: cluster.kubectl("get", "trainjob,jobset,events", check=False).stdout)
        # one JobSet named after the TrainJob, owned by it; its headless Service is the subdomain
        assert [o["kind"] for o in jobset["metadata"]["ownerReferences"]] == ["TrainJob"]
        [replicated] = jobset["spec"]["replicatedJobs"]
        assert replicated["name"] == "node"
        assert replicated["template"]["spec"]["parallelism"] == nodes

        # pods <name>-node-0-<i>-<suffix>, hostname <name>-node-0-<i> under subdomain <name>
        pods = check_pods_while_not_ready(cluster, f"jobset.sigs.k8s.io/jobset-name={name}", nodes,
                                          lambda i: f"{name}-node-0-{i}", subdomain=name, gpu=False)
        for pod in pods:
            [container] = pod["spec"]["containers"]
            assert container["name"] == "node"
            env = {e["name"]: e for e in container["env"]}
            assert len(env) == len(container["env"]), f"a variable set twice: {container['env']}"
            # the JAX plugin's three, the Job controller's index (Indexed Job), and the status plugin's
            # three (the test cluster turns the TrainJobStatus gate on; trainer/trainjob_status.py reads them)
            assert set(env) == {"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS",
                                "JOB_COMPLETION_INDEX", *STATUS_ENV}
            check_status_server_env(pod, env, cluster.namespace, name)
            assert env["JAX_NUM_PROCESSES"]["value"] == str(nodes)
            assert env["JAX_PROCESS_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX
            assert env["JAX_COORDINATOR_ADDRESS"]["value"] == f"{name}-node-0-0.{name}:{JAX_PORT}"
            assert {"containerPort": JAX_PORT, "protocol": "TCP"} in container["ports"]
            print(json.dumps({pod["metadata"]["name"]: container["env"]}))

        def complete():
            job = cluster.get("trainjob", name)
            assert not condition(job, "Failed"), job["status"]
            return condition(job, "Complete") and job
        wait_until("the TrainJob to complete", complete, timeout=120,
                   diagnose=lambda: cluster.kubectl("get", "trainjob,jobset,jobs,pods,events", check=False).stdout)
        assert condition(cluster.get("jobsets.jobset.x-k8s.io", name), "Completed")
    finally:
        cluster.kubectl("delete", "trainjob", name, "--ignore-not-found", "--wait", timeout=120)
    assert max(len(p["metadata"]["name"]) for p in pods) == DNS_LABEL_MAX
    # the JobSet goes with its TrainJob (garbage collector, owner reference)
    wait_until("the JobSet to be deleted",
               lambda: not cluster.kubectl("get", "jobsets.jobset.x-k8s.io", name, "--ignore-not-found",
                                           "-o", "name").stdout.strip(), timeout=60)


def test_one_character_more_gets_no_jobset(cluster):
    """The name limit is the JobSet webhook's, met only once the controller creates the JobSet:
    the TrainJob is admitted and stays without JobSet or status (a renderer must refuse it)."""
    name = "e2e-trainjob-".ljust(MAX_NAME_2_NODES + 1, "x")
    apply(cluster, trainjob(name, cluster.namespace, 2))
    log = cluster.state_dir / "logs" / "trainer-controller-manager.log"
    try:
        wait_until("the controller to report the refused JobSet", lambda: any(
            name in line and "pod names generated for this JobSet will exceed 63 characters" in line
            for line in log.read_text().splitlines()), timeout=60)
        assert cluster.kubectl("get", "jobsets.jobset.x-k8s.io", name, "--ignore-not-found",
                               "-o", "name").stdout == ""
        assert "conditions" not in cluster.get("trainjob", name).get("status", {})
    finally:
        cluster.kubectl("delete", "trainjob", name, "--ignore-not-found", "--wait", timeout=120)


@pytest.mark.timeout(300)
def test_the_trainjob_render_runs_through_the_lifecycle_scripts(cluster, build_dir):
    """jaxgen's TrainJob is admitted under PodSecurity "restricted" (its runtime patch carries our pod
    hygiene), its pods get the plugin's JAX_* and ours, run.sh reads its success, clean.sh removes it."""
    name, nodes, target = "e2e-trainjob-render", 2, TARGETS["trainjob"]
    prepare(cluster, build_dir, name, f"hosts_count={nodes}", f"annotations={json.dumps({READY_DELAY: '8s'})}",
            target="trainjob")
    run = start_run(cluster, build_dir)
    try:
        pods = check_pods_while_not_ready(cluster, target.workload.pod_selector.format(name=name), nodes,
                                          lambda i: target.workload.hosts.host(name, i), subdomain=name, gpu=False)
        for pod in pods:
            [container] = pod["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["JAX_COORDINATOR_ADDRESS"] == f"{target.workload.hosts.coordinator(name)}:{JAX_PORT}"
            assert env["PYTHONUNBUFFERED"] == "1"
            assert container["command"] == ["python", "-m", "trainer"] and container["args"][0] == "train"
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert pod["spec"]["securityContext"]["runAsUser"] == RUN_AS_ID
            assert {v["name"] for v in pod["spec"]["volumes"]} >= {"data", "checkpoints", "tmp"}
        code, output = finish(run)
        assert code == 0, output
        assert "succeeded" in output, output
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects(name) == []


def test_our_own_runtime_carries_the_failure_policy(cluster, build_dir):
    """trainjob.own_runtime: the rendered TrainingRuntime (applied before the TrainJob, which the
    webhook requires) gives the JobSet the controller makes our failure policy; clean.sh removes both."""
    name, nodes, target = "e2e-trainjob-own", 2, TARGETS["trainjob"]
    prepare(cluster, build_dir, name, f"hosts_count={nodes}", f"annotations={json.dumps({READY_DELAY: '8s'})}",
            "trainjob.own_runtime=true", "jobset.max_restarts=2", target="trainjob")
    run = start_run(cluster, build_dir)
    try:
        found = wait_until(f"JobSet {name}", lambda: cluster.kubectl("get", "jobset", name, "-o", "json",
                                                                       check=False).stdout,
                           timeout=120, run=run)
        jobset = json.loads(found)
        assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 2
        assert [r["action"] for r in jobset["spec"]["failurePolicy"]["rules"]] == [
            r["action"] for r in JOBSET_FAILURE_RULES]
        [job] = jobset["spec"]["replicatedJobs"]
        rules = job["template"]["spec"]["podFailurePolicy"]["rules"]
        assert rules[0]["action"] == "FailJob" and rules[0]["onExitCodes"]["containerName"] == target.workload.container
        pods = check_pods_while_not_ready(cluster, target.workload.pod_selector.format(name=name), nodes,
                                          lambda i: target.workload.hosts.host(name, i), subdomain=name, gpu=False)
        assert all(p["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] for p in pods)
        code, output = finish(run)
        assert code == 0, output
    finally:
        cluster.run([SCRIPTS / "clean.sh", build_dir], timeout=120)
    assert cluster.release_objects(name) == []
    assert cluster.kubectl("get", "trainingruntimes", "-l", f"app.kubernetes.io/instance={name}",
                           "-o", "name").stdout.strip() == ""
