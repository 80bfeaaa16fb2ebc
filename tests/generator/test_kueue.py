"""A job queued to Kueue (queue_name set): its job object carries the queue and priority labels and is
created suspended where Kueue manages its kind; its pod template asks for the topology; a JAXJob,
which a stock Kueue ignores, is left running unqueued and jaxgen says so in one line."""

from __future__ import annotations

import pytest

from generator.engines.kubernetes import jobs, kueue
from generator.engines.kubernetes.checks import EMPTYDIR_WARNING, UNBOUNDED_RESTARTS_WARNING
from generator import job_status
from generator.targets import KUBERNETES, workload

from tests.support.jaxgen import jaxgen

QUEUED = ("--set", "queue_name=team", "--set", "kueue.priority_class=high",
          "--set", "kueue.topology=example.com/rack")


def _job(target: str, *args: str) -> tuple[dict, str]:
    result = jaxgen("render", "--target", target, *args)
    assert result.exit_code == 0, result.stderr
    (job,) = [d for d in result.documents() if d["kind"] == workload(target).kind]
    return job, result.stderr


def _suspend(job: dict, target: str):
    """The job's `suspend`, where its row says it sits (None where it has none)."""
    path, node = workload(target).suspend_path, job
    for key in path[:-1]:
        node = node.get(key) or {}
    return node.get(path[-1]) if path else None


def _pod_template_annotations(job: dict, target: str) -> dict:
    """The annotations of the pod template: where the pod spec sits, or a TrainJob's runtime patch."""
    path = workload(target).pod_spec_path[:-1] or (
        "spec", "runtimePatches", 0, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", 0,
        "template", "spec", "template")
    node = job
    for key in path:
        node = node[key]
    return node["metadata"].get("annotations", {})


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("integration", [False, True])
def test_a_queued_job_is_created_suspended_where_kueue_manages_its_kind(target, integration):
    sets = ("--set", f"kueue.jaxjob_integration={str(integration).lower()}")
    job, stderr = _job(target, *QUEUED, *sets)
    managed = not workload(target).kueue_opt_in or integration
    labels = job["metadata"]["labels"]
    assert labels[kueue.QUEUE_LABEL] == "team" and labels[kueue.PRIORITY_LABEL] == "high"
    assert _suspend(job, target) is (True if managed and workload(target).suspend_path else None)
    annotations = _pod_template_annotations(job, target)
    assert annotations.get("kueue.x-k8s.io/podset-required-topology") == ("example.com/rack" if managed else None)
    warnings = [f"warning: {EMPTYDIR_WARNING}"] + ([] if managed else [f"warning: {kueue.UNMANAGED_WARNING}"])
    assert stderr.splitlines() == warnings + _unbounded(target)


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("integration", [False, True])
def test_jaxgen_status_reads_a_job_created_suspended_as_queued(target, integration):
    job, _ = _job(target, *QUEUED, "--set", f"kueue.jaxjob_integration={str(integration).lower()}")
    job["metadata"]["uid"] = "1"
    phase, _ = jobs._Job(job, [], []).phase()
    assert phase == (job_status.QUEUED if _suspend(job, target) else job_status.PENDING)


@pytest.mark.parametrize("target", KUBERNETES)
def test_without_a_queue_nothing_of_kueue_is_rendered(target):
    job, stderr = _job(target, "--set", "kueue.priority_class=high", "--set", "kueue.topology=rack",
                       "--set", "kueue.topology_mode=preferred")
    assert not [k for k in job["metadata"]["labels"] if k.startswith("kueue.x-k8s.io/")]
    assert _suspend(job, target) is None
    assert not [k for k in _pod_template_annotations(job, target) if k.startswith("kueue.x-k8s.io/")]
    assert stderr.splitlines() == [f"warning: {EMPTYDIR_WARNING}", *_unbounded(target)]


def _unbounded(target: str) -> list[str]:
    """The warning a JAXJob's render adds where no active_deadline_seconds bounds its restarts."""
    return [] if workload(target).counts_restarts else [f"warning: {UNBOUNDED_RESTARTS_WARNING}"]


def test_preferred_topology_and_bad_values():
    job, _ = _job("jobset", "--set", "queue_name=q", "--set", "kueue.topology=rack",
                  "--set", "kueue.topology_mode=preferred")
    kueue_annotations = {k: v for k, v in _pod_template_annotations(job, "jobset").items() if k.startswith("kueue.x-k8s.io/")}
    assert kueue_annotations == {"kueue.x-k8s.io/podset-preferred-topology": "rack"}
    for bad, field in (("kueue.topology_mode=strict", "$.kueue.topology_mode"),
                       ("kueue.priority_class=Not_A_Name", "$.kueue.priority_class")):
        result = jaxgen("render", "--set", "queue_name=q", "--set", bad)
        assert result.exit_code != 0 and field in result.stderr and result.stdout == ""
