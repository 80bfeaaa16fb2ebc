"""Property: any valid variables file renders documents that Kubernetes reads back as written (its
own YAML reader) and that pass strict validation."""

import json

import pytest
from hypothesis import HealthCheck, given, settings

from generator.targets import workload
from tests.support.jaxgen import jaxgen
from tests.support.manifests import KUBERNETES_VERSIONS, default_kinds, pod_templates, validation_problems
from tests.support.strategies import variables


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variables())
def test_valid_variables_render_valid_manifests(values):
    result = jaxgen("render", "-", stdin=json.dumps(values))
    assert result.exit_code == 0, result.stderr
    docs = result.documents()  # as Kubernetes reads them
    kinds = sorted(doc["kind"] for doc in docs)
    assert tuple(kinds) == default_kinds(values["target"])
    for version in KUBERNETES_VERSIONS:  # a render for each version is valid there
        for doc in jaxgen("render", "-", stdin=json.dumps({**values, "kube_version": version})).documents():
            assert validation_problems(doc, version) == [], doc["kind"]
    service = workload(values["target"]).hosts.service  # a coordinator Service of its own, if any
    for doc in docs:
        own = service.format(name=values["name"]) if service and doc["kind"] == "Service" else values["name"]
        assert doc["metadata"]["name"] == own
        assert values.get("labels", {}).items() <= doc["metadata"]["labels"].items()
        assert values.get("annotations", {}).items() <= doc["metadata"].get("annotations", {}).items()
    (template,) = pod_templates(docs)
    container = template["spec"]["containers"][0]
    assert all(entry in container["env"] for entry in values.get("env", []))
    assert all(isinstance(arg, str) for arg in container["args"])
