"""The Kubeflow SDK (`kubeflow`, the test extra's pin) as a Kubeflow user runs it against the test cluster:
its TrainerClient on the cluster's kubeconfig, and what it says of a TrainJob we rendered."""

from __future__ import annotations

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from kubeflow.trainer.constants import constants
from kubeflow_trainer_api import models

from generator.engines.kubernetes.policy import release_selector


def trainer_client(cluster) -> TrainerClient:
    return TrainerClient(KubernetesBackendConfig(namespace=cluster.namespace, config_file=str(cluster.kubeconfig)))


def assert_running(client: TrainerClient, name: str) -> None:
    """wait_for_job_status sees every node of the job running (it raises on a failed job, times out else)."""
    client.wait_for_job_status(name, {constants.TRAINJOB_RUNNING}, timeout=60, polling_interval=1)


def assert_finished(client: TrainerClient, name: str, nodes: int, cpu: str, log_line: str) -> None:
    """A finished TrainJob as the SDK reads it: complete, listed under the runtime it references, one
    succeeded step per node whose device is the cpu of its limits, node 0's log; and the labels and
    runtime reference other Kubeflow tools read, through the SDK's own model of the TrainJob."""
    job = client.wait_for_job_status(name, {constants.TRAINJOB_COMPLETE}, timeout=30, polling_interval=1)
    assert job.runtime.trainer.framework == "jax", job.runtime
    assert name in [listed.name for listed in client.list_jobs(runtime=client.get_runtime(job.runtime.name))]
    assert job.num_nodes == nodes
    steps = sorted((s.name, s.status, s.device, s.device_count) for s in job.steps)
    assert steps == [(f"node-{i}", "Succeeded", "cpu", cpu) for i in range(nodes)], steps
    assert any(log_line in line for line in client.get_job_logs(name)), f"node-0's log lacks {log_line!r}"
    stored = models.TrainerV1alpha1TrainJob.from_dict(client.backend.custom_api.get_namespaced_custom_object(
        constants.GROUP, constants.VERSION, client.backend.namespace, constants.TRAINJOB_PLURAL, name))
    release = dict(term.split("=") for term in release_selector(name).split(","))  # what jaxgen list selects
    assert release.items() <= stored.metadata.labels.items(), stored.metadata.labels
    reference = stored.spec.runtime_ref
    assert (reference.api_group, reference.kind, reference.name) == (
        constants.GROUP, job.runtime.kind.value, job.runtime.name), reference
