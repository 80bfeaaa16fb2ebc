"""The chart documents every value and carries the one version (that each generated file is what
scripts/generate.py writes is tests/generator/test_generated_files.py's)."""

from __future__ import annotations

import json

import yaml

from tests.support.paths import SCHEMA_FILE

from generator.kubernetes_versions import LOWEST

from .helm import CHART_DIR, helm

def test_schema_choices_are_the_trainers():
    from trainer import config, models

    training = json.loads(SCHEMA_FILE.read_text())["properties"]["training"]["properties"]
    assert tuple(training["model"]["enum"]) == models.NAMES
    assert tuple(training["precision"]["enum"]) == config.PRECISIONS
    assert tuple(training["optimizer"]["enum"]) == config.TrainConfig.__dataclass_fields__["optimizer"].metadata["choices"]


def _leaf_keys(schema: dict, prefix: str = ""):
    for key, prop in schema["properties"].items():
        if prop.get("type") == "object" and "properties" in prop:
            yield from _leaf_keys(prop, prefix + key + ".")
        else:
            yield prefix + key


def test_readme_documents_every_value():
    readme = (CHART_DIR / "README.md").read_text()
    schema = json.loads(SCHEMA_FILE.read_text())
    keys = list(_leaf_keys(schema))
    assert len(keys) >= 50
    for key in keys:
        assert f"| `{key}` |" in readme, f"{key} is not in the chart README"


def test_values_yaml_has_exactly_the_schema_keys():
    """values.yaml defines every key the schema knows, and no other."""
    schema = json.loads(SCHEMA_FILE.read_text())
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    def flat(values: dict, schema_: dict, prefix: str = ""):
        for key, value in values.items():
            prop = schema_["properties"].get(key, {})
            if prop.get("type") == "object" and "properties" in prop:
                yield from flat(value, prop, prefix + key + ".")
            else:
                yield prefix + key

    assert sorted(flat(defaults, schema)) == sorted(_leaf_keys(schema))


def test_the_chart_carries_the_one_version():
    from trainer import __version__

    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["kubeVersion"]
    assert chart["version"] == chart["appVersion"] == __version__  # scripts/generate.py writes them
    assert chart["kubeVersion"] == f">={LOWEST}-0"
    assert defaults["image"]["tag"] == ""  # appVersion with the accelerator's variant


def test_helm_refuses_a_cluster_older_than_the_lowest_supported():
    """The Indexed Job's successPolicy is off (alpha) before 1.31: such a cluster would drop it."""
    refused = helm("template", "r", str(CHART_DIR), "--kube-version", "1.30.0")
    assert refused.returncode == 1 and "incompatible with Kubernetes v1.30.0" in refused.stderr, refused.stderr
    assert helm("template", "r", str(CHART_DIR), "--kube-version", LOWEST).returncode == 0


def test_the_trainers_defaults_are_the_charts():
    """A setting the renders pass has one default: values.yaml's equals the trainer's own, except the
    directories (the container's paths against a local run's)."""
    import dataclasses

    from generator.values import defaults
    from trainer.config import TrainConfig, flag, rendered_flags

    values = defaults()
    fields = {flag(f): f for f in dataclasses.fields(TrainConfig)}
    compared = 0
    for row in rendered_flags():
        if row["flag"] not in fields or row["variable"] in ("data.dir", "checkpoint.dir"):
            continue
        value = values
        for key in row["variable"].split("."):
            value = value[key]
        f = fields[row["flag"]]
        default = f.default if f.default is not dataclasses.MISSING else list(f.default_factory())
        assert value == default, f"{row['variable']}: values.yaml {value!r}, trainer {default!r}"
        compared += 1
    assert compared >= 15


def test_every_trainer_setting_is_a_variable_or_says_why_not():
    import dataclasses

    from trainer.config import TrainConfig

    for f in dataclasses.fields(TrainConfig):
        meta = f.metadata
        assert meta["variable"] or meta["internal"], f"--{f.name}: no variable and no reason"


def test_jaxgen_defaults_prints_what_helm_show_values_prints():
    from tests.support.jaxgen import jaxgen

    printed = jaxgen("defaults")
    assert printed.exit_code == 0 and "# -- Number of hosts" in printed.stdout  # the values, commented
    shown = helm("show", "values", str(CHART_DIR))
    assert shown.returncode == 0 and shown.stdout.rstrip("\n") == printed.stdout.rstrip("\n")  # helm adds a newline
