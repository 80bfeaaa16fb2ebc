"""The Kubeflow SDK (`kubeflow`, its TrainerClient's Kubernetes backend) reads a rendered TrainJob: the
API server and the Trainer's controllers are stood in for by what they would answer (the TrainJob as
stored, its runtime, the node pods the runtime's JobSet makes from it), and the SDK's own code turns
them into its TrainJob, as TrainerClient's list_jobs, get_job and wait_for_job_status do. It read a
node's device from the container's limits and refused limits without one (memory alone): every call
on the namespace failed once a jaxgen TrainJob with the default resources was in it."""

from __future__ import annotations

import copy

import kubernetes.client as kubernetes_client
import pytest
import yaml
from kubeflow.trainer.backends.kubernetes import backend as backend_module  # the test extra's kubeflow
from kubeflow.trainer.constants import constants

from generator.engines.kubernetes import render_documents
from generator.values import load_values
from tests.support.manifests import trainjob_pod_template
from tests.support.paths import CRDS_DIR, EXAMPLES_DIR

NAMESPACE = "team"
CREATED = "2026-01-02T03:04:05Z"


class Reply:
    """What an async_req=True call of the Kubernetes client returns."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        return self.value


class Cluster:
    """The custom objects and pods the SDK asks the API server for, as the real client returns them."""

    def __init__(self, objects: list[dict], pods: list[dict]):
        self.objects, self.pods = objects, pods

    def _find(self, plural: str, name: str | None = None, namespaced: bool = True) -> list[dict]:
        kinds = {constants.TRAINJOB_PLURAL: "TrainJob", constants.TRAINING_RUNTIME_PLURAL: "TrainingRuntime",
                 constants.CLUSTER_TRAINING_RUNTIME_PLURAL: "ClusterTrainingRuntime"}
        return [o for o in self.objects if o["kind"] == kinds[plural] and name in (None, o["metadata"]["name"])
                and (o["metadata"].get("namespace") == NAMESPACE) == namespaced]

    def list_namespaced_custom_object(self, group, version, namespace, plural, async_req=False):
        return Reply({"items": self._find(plural)})

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, async_req=False):
        return self._get(plural, name, True)

    def get_cluster_custom_object(self, group, version, plural, name, async_req=False):
        return self._get(plural, name, False)

    def _get(self, plural, name, namespaced):
        found = self._find(plural, name, namespaced)
        if not found:
            raise kubernetes_client.ApiException(status=404, reason="Not Found")
        return Reply(found[0])

    def list_namespaced_pod(self, namespace, label_selector="", async_req=False):
        wanted = dict(term.split("=", 1) for term in label_selector.replace(" ", "").split(",") if "=" in term)
        pods = [p for p in self.pods if wanted.items() <= p["metadata"]["labels"].items()]
        api = kubernetes_client.ApiClient()
        return Reply(api._ApiClient__deserialize({"items": pods}, "V1PodList"))


def stored(doc: dict) -> dict:
    """An object as the API server keeps it: in the namespace, with its creation time."""
    doc = copy.deepcopy(doc)
    if doc["kind"] != "ClusterTrainingRuntime":
        doc["metadata"]["namespace"] = NAMESPACE
    doc["metadata"]["creationTimestamp"] = CREATED
    return doc


def node_pods(trainjob: dict) -> list[dict]:
    """The pods the runtime's JobSet makes of the TrainJob: its pod template with spec.trainer merged in."""
    name, template = trainjob["metadata"]["name"], trainjob_pod_template(trainjob)
    pods = []
    for index in range(trainjob["spec"]["trainer"]["numNodes"]):
        labels = {**template["metadata"].get("labels", {}), constants.JOBSET_NAME_LABEL: name,
                  constants.JOBSET_RJOB_NAME_LABEL: constants.NODE, constants.JOB_INDEX_LABEL: str(index)}
        pods.append({"metadata": {"name": f"{name}-node-0-{index}-abcde", "namespace": NAMESPACE, "labels": labels,
                                  "creationTimestamp": CREATED},
                     "spec": template["spec"], "status": {"phase": "Running"}})
    return pods


def sdk_backend(objects: list[dict], pods: list[dict]):
    """The SDK's Kubernetes backend (what TrainerClient() calls) on this stand-in cluster."""
    backend = object.__new__(backend_module.KubernetesBackend)  # its __init__ reads a kubeconfig
    backend.custom_api = backend.core_api = Cluster(objects, pods)
    backend.namespace = NAMESPACE
    return backend


def upstream_runtime() -> dict:
    return yaml.safe_load((CRDS_DIR / "trainer_runtime_jax_distributed.yaml").read_text())


@pytest.mark.parametrize("sets", [[], ["accelerator=gpu"], ["trainjob.own_runtime=true"]],
                         ids=["default", "gpu", "own runtime"])
def test_the_sdk_lists_gets_and_waits_for_a_rendered_trainjob(sets):
    values = load_values([str(EXAMPLES_DIR / "trainjob.json")], sets)
    docs = [stored(d) for d in render_documents(values)]
    [trainjob] = [d for d in docs if d["kind"] == "TrainJob"]
    objects = [*docs, stored(upstream_runtime())]
    backend = sdk_backend(objects, node_pods(trainjob))

    [listed] = backend.list_jobs()
    got = backend.get_job(values["name"])
    assert listed.name == got.name == values["name"] and got.num_nodes == values["hosts_count"]
    assert got.status == constants.TRAINJOB_RUNNING  # every node pod is running
    steps = {step.name: step for step in got.steps}
    assert sorted(steps) == [f"node-{i}" for i in range(values["hosts_count"])]
    device, count = ("gpu", str(values["local_device_count"])) if values["accelerator"] == "gpu" else \
        ("cpu", trainjob["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"])
    assert all((step.device, step.device_count) == (device, count) for step in steps.values())
    assert backend.wait_for_job_status(values["name"], {constants.TRAINJOB_RUNNING}, timeout=2,
                                       polling_interval=1).name == values["name"]


@pytest.mark.parametrize("resources,limits", [
    ('{"requests": {"cpu": "1500m"}}', {"cpu": "1500m", "memory": "4Gi"}),
    ('{"requests": {"cpu": "3"}, "limits": {"cpu": "5"}}', {"cpu": "5", "memory": "4Gi"}),  # the user's stays
    ('{"limits": null}', None),  # no limits: none are made
])
def test_limits_without_cpu_take_the_cpu_request_and_no_other_limits_change(resources, limits):
    values = load_values([str(EXAMPLES_DIR / "trainjob.json")], set_jsons=[f"resources={resources}"])
    [trainjob] = [d for d in render_documents(values) if d["kind"] == "TrainJob"]
    assert trainjob["spec"]["trainer"]["resourcesPerNode"].get("limits") == limits
