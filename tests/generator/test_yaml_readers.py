"""Every render reads back as written under Kubernetes' YAML reader (go-yaml through sigs.k8s.io/yaml),
not only under PyYAML: a string is never read as a number or a boolean, a character is never lost."""

from __future__ import annotations

import json

import pytest

from generator import yaml_text
from generator.output import dump_yaml
from generator.paths import VALUES_FILE
from generator.engines.kubernetes import render_documents
from generator.targets import KUBERNETES
from generator.values import load_values
from tests.support import kubernetes_yaml
from tests.support.examples import KUBERNETES_EXAMPLES
from tests.support.jaxgen import jaxgen
from tests.support.manifests import pod_templates
from tests.support.paths import EXAMPLES_DIR
from tests.support.strategies import YAML_LOOKALIKES

GOLDEN_DIR = EXAMPLES_DIR.parents[1] / "tests" / "generator" / "golden"
# Of the look-alikes, those the schema allows as a label value and as an image tag.
LABEL_LOOKALIKES = [s for s in YAML_LOOKALIKES if s and s.replace(".", "").replace("_", "").isalnum()
                    and s[0].isalnum() and s[-1].isalnum() and s.isascii()]


def pod(docs: list[dict]) -> dict:
    (template,) = pod_templates(docs)
    return template


@pytest.mark.parametrize("path", KUBERNETES_EXAMPLES, ids=lambda p: p.name)
def test_examples_read_back_as_rendered(path):
    docs = render_documents(load_values([str(path)]))
    kubernetes_yaml.assert_read_as_written(dump_yaml(docs), docs)


@pytest.mark.parametrize("path", sorted(GOLDEN_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_golden_renders_read_the_same_in_go_and_python(path):
    text = path.read_text()
    kubernetes_yaml.assert_read_as_written(text, yaml_text.load_all(text))


def test_defaults_read_the_same_in_go_and_python():
    """Helm reads values.yaml with Go; jaxgen's defaults are the same data."""
    text = VALUES_FILE.read_text()
    assert kubernetes_yaml.decode(text) == [kubernetes_yaml.as_json(yaml_text.load(text))]


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("text", YAML_LOOKALIKES, ids=ascii)
def test_free_text_reaches_kubernetes_unchanged(text, target):
    values = {"target": target, "annotations": {"example.com/note": text},
              "env": [{"name": "NOTE", "value": text}]}
    result = jaxgen("render", "-", stdin=json.dumps(values))
    assert result.exit_code == 0, result.stderr
    template = pod(result.documents())
    assert template["metadata"]["annotations"]["example.com/note"] == text
    assert {"name": "NOTE", "value": text} in template["spec"]["containers"][0]["env"]


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("text", LABEL_LOOKALIKES)
def test_label_and_tag_lookalikes_stay_strings(text, target):
    values = {"target": target, "labels": {text: text}, "node_selector": {text: text}, "image": {"tag": text}}
    result = jaxgen("render", "-", stdin=json.dumps(values))
    assert result.exit_code == 0, result.stderr
    for doc in result.documents():
        assert doc["metadata"]["labels"][text] == text
        assert doc["metadata"]["labels"]["app.kubernetes.io/version"] == text
    template = pod(result.documents())
    assert template["spec"]["nodeSelector"] == {text: text}
    assert template["spec"]["containers"][0]["image"].endswith(f":{text}")


@pytest.mark.parametrize("rate", ["3e-05", "1e-07", "0.5"])
def test_learning_rate_argument_is_a_string(rate):
    result = jaxgen("render", "--set-json", f"training.learning_rate={rate}")  # --set keeps 0.5 a string, as Helm
    assert result.exit_code == 0, result.stderr
    args = pod(result.documents())["spec"]["containers"][0]["args"]
    assert args[args.index("--learning-rate") + 1] == str(float(rate))
    assert all(isinstance(arg, str) for arg in args)


def test_numbers_in_pass_through_objects_stay_numbers():
    """JSON writes 1e+16 for a float, which YAML 1.1 reads as a string; the render keeps the number."""
    toleration = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1e16}
    result = jaxgen("render", "-", stdin=json.dumps({"tolerations": [toleration]}))
    assert result.exit_code == 0, result.stderr
    assert pod(result.documents())["spec"]["tolerations"][0] == toleration  # the lost node's follow it


@pytest.mark.parametrize("text", [s for s in YAML_LOOKALIKES if s] + ["a" * 5000, "x\ny: 1", "é ü"])
def test_plain_strings_are_only_the_unambiguous_ones(text):
    """Any string, as a key and as a value, reads back as itself; only safe ones are left bare."""
    written = dump_yaml([{text: text}])
    assert kubernetes_yaml.decode(written) == [{text: text}]
    assert yaml_text.load_all(written) == [{text: text}]
    assert ('"' not in written) == yaml_text.is_plain_safe(text)
