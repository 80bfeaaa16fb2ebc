"""What the engines do to our pods, as they do it on a real cluster: an engine sets its own variables
(the training-operator injects the coordinator variables into JAXJob pods from the port named
jaxjob-port), and a Job replaces a failed rank's pod only once it is gone and is done when rank 0 is."""

import pytest

from generator.targets import KUBERNETES, LOCAL, TARGETS
from tests.support.jaxgen import jaxgen
from tests.support.manifests import pod_templates


def containers(docs):
    for template in pod_templates(docs):
        yield from template["spec"]["containers"]


def engine_sets(target: str) -> set[str]:
    """The variables the row says the engine sets in every pod (training-operator v1.9: COORDINATOR_PORT
    from the port named jaxjob-port)."""
    row = TARGETS[target]
    return {name for launcher in row.engine_sets for name in launcher.env(0, 2, "h", 1)} | set(row.workload.engine_env)


def test_jaxjob_coordinator_port_is_the_one_the_operator_reads():
    result = jaxgen("render", "--target", "jaxjob", "--set", "coordinator_port=2345")
    assert result.exit_code == 0, result.stderr
    (container,) = containers(result.documents())
    # the operator finds it by name (other ports, such as the metrics port, are left alone)
    assert [p for p in container["ports"] if p["name"] == "jaxjob-port"] == [
        {"name": "jaxjob-port", "containerPort": 2345, "protocol": "TCP"}]
    assert engine_sets("jaxjob") >= {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"}


@pytest.mark.parametrize("target", KUBERNETES)
def test_we_leave_to_the_engine_what_it_sets(target):
    result = jaxgen("render", "--target", target)
    assert result.exit_code == 0, result.stderr
    text = str(result.documents())
    assert not [name for name in engine_sets(target) if f"'{name}'" in text]


@pytest.mark.parametrize("target", LOCAL)
def test_no_variable_is_set_twice(target):
    result = jaxgen("render", "--target", target, "--set-json", 'env=[{"name": "EXTRA", "value": "1"}]')
    assert result.exit_code == 0, result.stderr
    for container in containers(result.documents()):
        names = [e["name"] for e in container.get("env", [])]
        assert len(names) == len(set(names)), names
        assert "EXTRA" in names


def test_indexed_job_waits_for_a_failed_pod_and_ends_with_rank_0():
    result = jaxgen("render", "--target", "indexed-job")
    assert result.exit_code == 0, result.stderr
    (job,) = [d for d in result.documents() if d["kind"] == "Job"]
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}


@pytest.mark.parametrize("backoff_limit, hosts, expected", [(0, 2, 1), (1, 1, 1), (3, 2, 6)])
def test_a_jaxjob_backoff_limit_is_never_0(backoff_limit, hosts, expected):
    """The training-operator (v1.9) fails a JAXJob with backoffLimit 0 on its first failed pod, a stopped
    one included, and counts none above it: the render's floor keeps a stop from failing it."""
    result = jaxgen("render", "--target", "jaxjob", "--set", f"backoff_limit={backoff_limit}",
                    "--set", f"hosts_count={hosts}")
    assert result.exit_code == 0, result.stderr
    (job,) = [d for d in result.documents() if d["kind"] == "JAXJob"]
    assert job["spec"]["runPolicy"]["backoffLimit"] == expected
