"""Property: any valid variables file renders documents that parse and pass strict validation."""

import json

from hypothesis import HealthCheck, given, settings

from tests.support.manifests import KUBERNETES_VERSIONS, validation_problems
from tests.support.strategies import variables

from .jaxgen import jaxgen


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variables())
def test_valid_variables_render_valid_manifests(values):
    result = jaxgen("render", "-", stdin=json.dumps(values))
    assert result.exit_code == 0, result.stderr
    docs = result.documents()
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == {"indexed-job": ["Job", "Service"], "jaxjob": ["JAXJob"], "jobset": ["JobSet"]}[values["target"]]
    for doc in docs:
        assert doc["metadata"]["name"] == values["name"]
        for version in KUBERNETES_VERSIONS:
            assert validation_problems(doc, version) == [], doc["kind"]
