"""`jaxgen status` and `jaxgen list` say in one line why a job waits, on the kwok control plane, each
cause produced for real and for a job of every Kubernetes target where the cause is not the kind's
own: the scheduler finds too little cpu, memory or GPUs or no node of the selector; an admission
policy refuses the pods the job's controller creates; a pod waits for a claim of a StorageClass that
does not exist, or for a claim that does not exist. (Kueue's reason and a NotReady node:
test_job_commands.py; an image that cannot be pulled and a restarted rank: the real node's tests.)"""

from __future__ import annotations

import json
import re

import pytest

from generator.engines.kubernetes.policy import release_selector
from generator.job_status import short_cause
from generator.targets import TARGETS
from tests.e2e_k8s.kube import Cluster, wait_until
from tests.e2e_k8s.test_job_commands import jaxgen, start

REFUSE_LABEL = "e2e.jax-training.io/refuse"
REFUSED = "pods labelled e2e.jax-training.io/refuse are refused in this cluster"


def resources(**asked: str) -> list[str]:
    """--set-json of resources asking for `asked` (requests and limits), 1 cpu and 512Mi otherwise."""
    requests = {"cpu": "1", "memory": "512Mi", **asked}
    return ["--set-json", f"resources={json.dumps({'requests': requests, 'limits': {'memory': requests['memory']}})}"]


def delete(cluster: Cluster, *names: str) -> None:
    for name in names:
        for resource in {t.workload.resource for t in TARGETS.values() if t.workload}:
            cluster.kubectl("delete", resource, "-l", release_selector(name), "--ignore-not-found", "--wait=false",
                            check=False)


def same_pod(line: str) -> str:
    return re.sub(r'(pods "[-a-z0-9]*-)[a-z0-9]{5}"', r'\1xxxxx"', line)


def cause_of(cluster: Cluster, name: str, begins: str) -> str | None:
    """The job's cause line once it begins so (None before)."""
    proc = jaxgen(cluster, "status", name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    cause = json.loads(proc.stdout).get("cause", "")
    return cause if cause.startswith(begins) else None


def wait_for_causes(cluster: Cluster, expected: dict[str, str]) -> dict[str, str]:
    """Each job's cause line once it begins as expected; and `jaxgen list` shows each, shortened."""
    found = {name: wait_until(f"the cause of {name}", lambda name=name: cause_of(cluster, name, begins),
                              timeout=60, interval=1,
                              diagnose=lambda name=name: jaxgen(cluster, "status", name).stdout)
             for name, begins in expected.items()}
    table = jaxgen(cluster, "list").stdout.splitlines()
    assert table[0].split() == ["NAME", "KIND", "PHASE", "PROGRESS", "ETA", "AGE", "CAUSE"], table
    for name, cause in found.items():
        [row] = [line for line in table if line.split()[0] == name]
        shown = row[table[0].index("CAUSE"):]
        # a refusal names the pod the controller tried last: a new random suffix each try
        assert same_pod(shown) == same_pod(short_cause(cause)) and (shown == cause or shown.endswith("…")), row
        text = jaxgen(cluster, "status", name).stdout.splitlines()
        assert same_pod(text[2]) == same_pod(f"cause:      {cause}"), text  # after name and phase
    return found


@pytest.mark.timeout(180)
def test_status_names_what_no_node_has_for_a_job_of_each_target(cluster):
    jobs = {  # name: (target, what it asks, the start of its cause line)
        "e2e-why-cpu": ("indexed-job", resources(cpu="100"),
                        "unschedulable: rank 0 asks cpu 100: 0/4 nodes are available: "),
        "e2e-why-memory": ("jaxjob", resources(memory="900Gi"),
                           "unschedulable: rank 0 asks memory 900Gi: 0/4 nodes are available: "),
        "e2e-why-selector": ("jobset", ["--set-json", 'node_selector={"e2e.jax-training.io/pool": "nowhere"}'],
                             "unschedulable: rank 0 asks node selector e2e.jax-training.io/pool=nowhere: 0/4 nodes "
                             "are available: "),
        "e2e-why-gpus": ("trainjob", ["--set", "accelerator=gpu", "--set", "local_device_count=16"],
                         "unschedulable: rank 0 asks nvidia.com/gpu 16: 0/4 nodes are available: "),
    }
    try:
        for name, (target, asks, _) in jobs.items():
            start(cluster, target, name, *asks)
        found = wait_for_causes(cluster, {name: begins for name, (_, _, begins) in jobs.items()})
        assert "Insufficient cpu" in found["e2e-why-cpu"] and "Insufficient memory" in found["e2e-why-memory"], found
        # the GPU nodes' taint, which the scheduler only counts, named
        assert found["e2e-why-cpu"].endswith("had untolerated taint(s) (nvidia.com/gpu=present:NoSchedule)"), found
        assert "didn't match Pod's node affinity/selector" in found["e2e-why-selector"], found
        # The GPU nodes have 8 each; the CPU nodes none, and a taint the GPU pod tolerates: not named.
        assert "Insufficient nvidia.com/gpu" in found["e2e-why-gpus"], found
        assert not any("preemption:" in cause or "claims to deallocate" in cause for cause in found.values()), found
        print(json.dumps(found, indent=1))
    finally:
        delete(cluster, *jobs)


@pytest.mark.timeout(180)
def test_status_names_the_admission_refusal_of_a_job_of_each_target(cluster):
    """A ValidatingAdmissionPolicy refuses the pods: the Job controller (of the Job, of a JobSet's or a
    TrainJob's child Job) or the training-operator (JAXJob) records why it cannot create them."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "e2e-refuse-pods"},
              "spec": {"failurePolicy": "Fail", "validations": [{"expression": "false", "message": REFUSED}],
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["pods"]}]}}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "e2e-refuse-pods"},
               "spec": {"policyName": "e2e-refuse-pods", "validationActions": ["Deny"],
                        "matchResources": {"objectSelector": {"matchLabels": {REFUSE_LABEL: "true"}}}}}
    names = {target: f"e2e-why-refused-{target}" for target in TARGETS if TARGETS[target].workload}
    try:
        cluster.run(["kubectl", "apply", "-f", "-"], input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                      "items": [policy, binding]}))
        probe = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "e2e-refuse-probe", "namespace": cluster.namespace,
                              "labels": {REFUSE_LABEL: "true"}},
                 "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                          "containers": [{"name": "probe", "image": "x", "securityContext": {
                              "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}
        wait_until("the policy in force", lambda: REFUSED in cluster.run(
            ["kubectl", "apply", "--dry-run=server", "-f", "-"], input=json.dumps(probe), check=False).stderr,
            timeout=30)
        for target, name in names.items():
            start(cluster, target, name, "--set-json", f'labels={{"{REFUSE_LABEL}": "true"}}')
        found = wait_for_causes(cluster, {name: "refused at admission: " for name in names.values()})
        for cause in found.values():
            assert "ValidatingAdmissionPolicy 'e2e-refuse-pods' with binding 'e2e-refuse-pods' denied request: " \
                   f"{REFUSED}" in cause, found
        print(json.dumps(found, indent=1))
    finally:
        delete(cluster, *names.values())
        cluster.run(["kubectl", "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy",
                     "e2e-refuse-pods", "--ignore-not-found"], check=False)


@pytest.mark.timeout(180)
def test_status_names_the_claim_a_job_waits_for_and_its_storage_class(cluster):
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "e2e-why-claim", "namespace": cluster.namespace},
             "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "e2e-no-such-class",
                      "resources": {"requests": {"storage": "1Gi"}}}}
    jobs = {"e2e-why-claim": "claim e2e-why-claim (StorageClass e2e-no-such-class) is Pending: ",
            "e2e-why-no-claim": "claim e2e-why-nothing does not exist"}
    try:
        cluster.run(["kubectl", "apply", "-f", "-"], input=json.dumps(claim))
        for name, claim_name in (("e2e-why-claim", "e2e-why-claim"), ("e2e-why-no-claim", "e2e-why-nothing")):
            start(cluster, "indexed-job", name, "--set-json",
                  f'data.volume={{"persistentVolumeClaim": {{"claimName": "{claim_name}", "readOnly": true}}}}')
        found = wait_for_causes(cluster, jobs)
        # the persistent-volume controller's own words
        assert found["e2e-why-claim"].endswith('storageclass.storage.k8s.io "e2e-no-such-class" not found'), found
        assert found["e2e-why-no-claim"] == jobs["e2e-why-no-claim"], found
        print(json.dumps(found, indent=1))
    finally:
        delete(cluster, *jobs)
        cluster.kubectl("delete", "pvc", "e2e-why-claim", "--ignore-not-found", "--wait=false", check=False)
