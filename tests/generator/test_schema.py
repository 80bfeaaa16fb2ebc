"""The complete schema (variables/schema.json as scripts/generate.py completes it) is documented,
closed, and in step with values.yaml."""

import json

import jsonschema
import yaml

from tests.support.paths import REPO_ROOT, SCHEMA_FILE

SCHEMA = json.loads(SCHEMA_FILE.read_text())
VALUES = yaml.safe_load((REPO_ROOT / "charts" / "jax-training" / "values.yaml").read_text())
PASS_THROUGH = {"resources", "affinity", "tolerations", "volume", "node_selector", "labels", "annotations", "env"}


def _owned_properties(schema, path=()):
    for key, sub in schema.get("properties", {}).items():
        yield path + (key,), sub
        if sub.get("type") == "object" and key not in PASS_THROUGH:
            yield from _owned_properties(sub, path + (key,))


def test_schema_is_valid_draft7():
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_every_field_is_documented_with_a_default():
    for path, sub in _owned_properties(SCHEMA):
        assert sub.get("description"), path
        assert "default" in sub or sub.get("type") == "object", path


def test_objects_we_own_are_closed():
    assert SCHEMA["additionalProperties"] is False
    for path, sub in _owned_properties(SCHEMA):
        if sub.get("type") == "object" and path[-1] not in PASS_THROUGH:
            assert sub.get("additionalProperties") is False, path


def test_schema_defaults_equal_values_yaml():
    def defaults(schema):
        return {key: (defaults(sub) if "properties" in sub else sub["default"])
                for key, sub in schema["properties"].items()}

    assert defaults(SCHEMA) == VALUES


def test_values_yaml_is_valid():
    assert list(jsonschema.Draft7Validator(SCHEMA).iter_errors(VALUES)) == []


def test_a_trainer_settings_default_and_choices_are_written_once():
    """TrainConfig is the home of a trainer setting's default and choices: the hand-written schema
    restates neither (it gives a default only where the deployment's differs, e.g. data.dir)."""
    from trainer import models
    from trainer.config import variable_settings

    hand = json.loads((REPO_ROOT / "variables" / "schema.json").read_text())
    assert "definitions" not in hand  # generated into the complete schema only
    models_part = models.schema_fragment()
    assert not set(models_part) & set(hand["properties"]["training"]["properties"])  # the registry's, generated
    for setting in variable_settings():
        if setting.variable.split(".")[:2] in [["training", name] for name in models_part]:
            continue
        prop = hand
        for key in setting.variable.split("."):
            prop = prop["properties"][key]
        assert prop.get("default", ...) != setting.default, f"{setting.variable}: default restated"
        assert not setting.choices or "enum" not in prop, f"{setting.variable}: choices restated"


def test_name_length_limits_and_the_coordinator_port_come_from_their_homes():
    """The hand-written schema names a Kubernetes name limit (x-max-length) where the complete schema
    has its maxLength from generator/engines/kubernetes/policy.py, and leaves the coordinator port's
    default to trainer/cluster.py."""
    from generator.engines.kubernetes.policy import DNS_LABEL_MAX, LENGTH_LIMITS
    from trainer.cluster import DEFAULT_PORT

    hand_text = (REPO_ROOT / "variables" / "schema.json").read_text()
    hand = json.loads(hand_text)
    assert "default" not in hand["properties"]["coordinator_port"]
    assert SCHEMA["properties"]["coordinator_port"]["default"] == DEFAULT_PORT == VALUES["coordinator_port"]
    assert "x-max-length" not in SCHEMA_FILE.read_text()
    named = hand_text.count('"x-max-length"')
    assert named >= 3 and sum(SCHEMA_FILE.read_text().count(f'"maxLength": {n}') for n in set(LENGTH_LIMITS.values())) == named
    assert hand["properties"]["name"]["x-max-length"] == "dns-label"
    assert SCHEMA["properties"]["name"]["maxLength"] == DNS_LABEL_MAX
