"""Every render of every example is a valid object: core kinds in strict mode for the lowest and
newest supported Kubernetes (generator/kubernetes_versions.py, kubernetes-validate), each rendered for
that version (kube_version), JAXJob, JobSet and TrainJob against their CRDs' openAPIV3Schema."""

import pytest

from generator.targets import KUBERNETES
from tests.support.examples import KUBERNETES_EXAMPLES
from tests.support.jaxgen import jaxgen
from tests.support.manifests import KUBERNETES_VERSIONS, validation_problems
from tests.support.paths import EXAMPLES_DIR
from tests.support.strategies import choices

K8S_EXAMPLES = [p.name for p in KUBERNETES_EXAMPLES]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("example", K8S_EXAMPLES)
def test_example_validates(example, version):
    result = jaxgen("render", str(EXAMPLES_DIR / example), "--set", f"kube_version={version}")
    assert result.exit_code == 0, result.stderr
    docs = result.documents()
    assert docs
    for doc in docs:
        assert validation_problems(doc, version) == [], f"{example}: {doc['kind']}"


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("accelerator", choices("accelerator"))
def test_each_target_validates(target, accelerator):
    for version in KUBERNETES_VERSIONS:
        result = jaxgen("render", "--target", target, "--set", f"accelerator={accelerator}",
                        "--set", f"kube_version={version}")
        assert result.exit_code == 0, result.stderr
        for doc in result.documents():
            assert validation_problems(doc, version) == []


def test_validator_catches_a_bad_manifest():
    """The strict check itself must be able to fail: an unknown field and a wrong type."""
    result = jaxgen("render", "--target", "jaxjob")
    jaxjob = next(doc for doc in result.documents() if doc["kind"] == "JAXJob")
    jaxjob["spec"]["jaxReplicaSpecs"]["Worker"]["replicaz"] = 2
    assert validation_problems(jaxjob)
    job = jaxgen("render").documents()[1]
    job["spec"]["completions"] = "two"
    assert validation_problems(job)
    job["spec"]["completions"] = 2
    job["spec"]["template"]["spec"]["containerz"] = []
    assert validation_problems(job)


@pytest.mark.parametrize("target", KUBERNETES)
def test_4096_hosts_validate_and_the_cap_is_the_indexed_job_parallelism_limit(target):
    for version in KUBERNETES_VERSIONS:
        result = jaxgen("render", "--target", target, "--set", "hosts_count=4096", "--set", "training.batch_size=32768",
                        "--set", f"kube_version={version}")
        assert result.exit_code == 0, result.stderr
        for doc in result.documents():
            assert validation_problems(doc, version) == []
    # Kubernetes refuses an Indexed Job (JobSets run one) with a parallelism above 100000
    over = jaxgen("render", "--target", target, "--set", "hosts_count=100001", "--set", "local_device_count=1")
    assert over.exit_code == 2 and "$.hosts_count: 100001 is greater than the maximum of 100000" in over.stderr
    at_cap = jaxgen("render", "--target", target, "--set", "hosts_count=100000", "--set", "local_device_count=1")
    assert "$.hosts_count" not in at_cap.stderr


def test_a_render_for_a_newer_kubernetes_is_refused_by_an_older_one():
    """What tells the versions apart: the Indexed Job's container restart rules, which the lowest
    supported API server does not know (so a render must be for the cluster's version)."""
    newest, lowest = KUBERNETES_VERSIONS[-1], KUBERNETES_VERSIONS[0]
    job = next(d for d in jaxgen("render").documents() if d["kind"] == "Job")
    assert validation_problems(job, newest) == []
    assert any("restartPolicyRules" in problem for problem in validation_problems(job, lowest))
