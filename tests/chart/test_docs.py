"""The chart's copies and docs follow their single sources: values.schema.json is variables/schema.json
byte for byte, files/exit-codes.json is trainer/exit_codes.py's table, and the README's values table
is what scripts/chart-readme.py writes."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.support.paths import REPO_ROOT

from generator.kubernetes_versions import LOWEST

from .helm import CHART_DIR, helm

SCRIPT = REPO_ROOT / "scripts" / "chart-readme.py"


def test_values_schema_is_the_variables_schema():
    chart_copy = (CHART_DIR / "values.schema.json").read_bytes()
    source = (REPO_ROOT / "variables" / "schema.json").read_bytes()
    assert chart_copy == source, "charts/jax-training/values.schema.json drifted: run `make sync-schema`"


def test_kubernetes_definitions_are_the_bundled_schemas():
    """The pass-through Kubernetes types in the schema are what scripts/kubernetes-definitions.py
    writes from kubernetes-validate's strict schemas (and a typo in them is refused: bad_inputs)."""
    script = REPO_ROOT / "scripts" / "kubernetes-definitions.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_exit_codes_are_the_trainers_table():
    from trainer import exit_codes

    chart_copy = (CHART_DIR / "files" / "exit-codes.json").read_text()
    assert chart_copy == exit_codes.as_json(), "charts/jax-training/files/exit-codes.json drifted: run `make sync-schema`"


def test_process_env_names_are_the_trainers():
    from trainer import cluster

    chart_copy = (CHART_DIR / "files" / "process-env.json").read_text()
    assert chart_copy == cluster.process_env_json(), "charts/jax-training/files/process-env.json drifted: run `make sync-schema`"


def test_generated_chart_files_are_current():
    from generator import checks, images, targets
    from trainer import config, models

    for name, expected in (("trainer-flags.json", config.flags_json()), ("models.json", models.facts_json()),
                           ("targets.json", targets.chart_rows()), ("warnings.json", checks.warnings_json()),
                           ("image-variants.json", images.variants_json())):
        assert (CHART_DIR / "files" / name).read_text() == expected, f"files/{name} drifted: run `make sync-schema`"


def test_the_schemas_models_are_the_registrys():
    """training.model's enum and each model's settings object are what scripts/model-schema.py writes
    from trainer/models (make sync-schema)."""
    script = REPO_ROOT / "scripts" / "model-schema.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_schema_choices_are_the_trainers():
    from trainer import config, models

    training = json.loads((REPO_ROOT / "variables" / "schema.json").read_text())["properties"]["training"]["properties"]
    assert tuple(training["model"]["enum"]) == models.NAMES
    assert tuple(training["precision"]["enum"]) == config.PRECISIONS
    assert tuple(training["optimizer"]["enum"]) == config.TrainConfig.__dataclass_fields__["optimizer"].metadata["choices"]


def test_readme_values_table_is_up_to_date():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _leaf_keys(schema: dict, prefix: str = ""):
    for key, prop in schema["properties"].items():
        if prop.get("type") == "object" and "properties" in prop:
            yield from _leaf_keys(prop, prefix + key + ".")
        else:
            yield prefix + key


def test_readme_documents_every_value():
    readme = (CHART_DIR / "README.md").read_text()
    schema = json.loads((REPO_ROOT / "variables" / "schema.json").read_text())
    keys = list(_leaf_keys(schema))
    assert len(keys) >= 50
    for key in keys:
        assert f"| `{key}` |" in readme, f"{key} is not in the chart README"


def test_values_yaml_has_exactly_the_schema_keys():
    """values.yaml defines every key the schema knows, and no other."""
    schema = json.loads((REPO_ROOT / "variables" / "schema.json").read_text())
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    def flat(values: dict, schema_: dict, prefix: str = ""):
        for key, value in values.items():
            prop = schema_["properties"].get(key, {})
            if prop.get("type") == "object" and "properties" in prop:
                yield from flat(value, prop, prefix + key + ".")
            else:
                yield prefix + key

    assert sorted(flat(defaults, schema)) == sorted(_leaf_keys(schema))


def test_check_mode_detects_a_stale_table(tmp_path, monkeypatch):
    """--check fails on a README whose table was edited by hand."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("chart_readme", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stale = tmp_path / "README.md"
    stale.write_text((CHART_DIR / "README.md").read_text().replace("| `hosts_count` |", "| `hosts` |"))
    monkeypatch.setattr(module, "README", stale)
    monkeypatch.setattr(sys, "argv", ["chart-readme.py", "--check"])
    try:
        module.main()
    except SystemExit as exit_:
        assert "out of date" in str(exit_.code)
    else:
        raise AssertionError("--check accepted a stale table")


def test_the_chart_carries_the_one_version():
    from trainer import __version__

    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["kubeVersion"]
    assert chart["version"] == chart["appVersion"] == __version__  # scripts/chart-version.py writes them
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
        assert meta["variable"] or meta["hidden"] or meta["internal"], f"--{f.name}: no variable and no reason"
