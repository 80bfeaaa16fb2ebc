#!/usr/bin/env python3
"""Write every generated file of the repository from its one hand-written home, or check them.

Usage: python scripts/generate.py [--check]   (make generate / make check-generated)
  --check  write nothing; list the files that are not what this would write and exit 1.

The golden renders (tests/generator/golden/) are not generated here: they are the tests' oracle,
reviewed by hand after `make golden`; writing them from the code they check would let any change pass.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import chart_docs  # noqa: E402
import chart_version  # noqa: E402
import failure_docs  # noqa: E402
import kubernetes_definitions  # noqa: E402
from generator import checks, images, kubernetes_versions, rules, targets  # noqa: E402
from generator.engines.kubernetes import chart_files, checks as kubernetes_checks, policy  # noqa: E402
from generator.engines.kubernetes import rules as kubernetes_rules  # noqa: E402
from generator.engines.slurm import checks as slurm_checks  # noqa: E402
from trainer import cluster, config, exit_codes, models  # noqa: E402

CHART = ROOT / "charts" / "jax-training"
HAND_SCHEMA = ROOT / "variables" / "schema.json"


def _property(schema: dict, dotted: str) -> dict:
    node = schema
    for key in dotted.split("."):
        node = node["properties"][key]
    return node


def _with_length_limits(node):
    """The hand-written schema with every `"x-max-length": LIMIT` replaced, in place, by the limit's maxLength."""
    if isinstance(node, list):
        return [_with_length_limits(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {("maxLength" if key == "x-max-length" else key):
            (policy.LENGTH_LIMITS[value] if key == "x-max-length" else _with_length_limits(value))
            for key, value in node.items()}


def complete_schema() -> dict:
    """variables/schema.json completed into one self-contained file (what Helm reads as
    values.schema.json and jaxgen validates with): the target enum from the target table
    (generator/targets.py), the models' part from the model registry
    (trainer/models), each trainer setting's default, and its choices as the enum, from
    trainer/config.py where the hand-written schema gives none, and the Kubernetes definitions its
    $refs name, each name-length limit it names (x-max-length) as a maxLength from
    generator/engines/kubernetes/policy.py, and the coordinator port's default from trainer/cluster.py."""
    schema = _with_length_limits(json.loads(HAND_SCHEMA.read_text()))
    schema["properties"]["coordinator_port"]["default"] = cluster.DEFAULT_PORT
    schema["properties"]["target"]["enum"] = list(targets.NAMES)  # the target table's rows
    training = schema["properties"]["training"]
    models_part = models.schema_fragment()  # training.model and each model's settings object
    training["properties"].update(models_part)
    training["required"] += list(models_part)
    for setting in config.variable_settings():
        prop = _property(schema, setting.variable)
        if setting.choices and "enum" not in prop:
            prop["enum"] = list(setting.choices)
        if "default" not in prop:
            prop["default"] = setting.default
    schema["definitions"] = kubernetes_definitions.definitions()
    return schema


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def outputs() -> dict[Path, str]:
    """Every generated file (path -> the text it should hold)."""
    schema = complete_schema()
    return {
        CHART / "values.schema.json": _json(schema),
        CHART / "values.yaml": chart_docs.values_yaml(schema),
        CHART / "README.md": chart_docs.readme((CHART / "README.md").read_text(), schema),
        CHART / "Chart.yaml": chart_version.updated((CHART / "Chart.yaml").read_text()),
        CHART / "files" / "contract.json": chart_files.chart_json(),
        CHART / "files" / "exit-codes.json": exit_codes.as_json(),
        CHART / "files" / "trainer-flags.json": config.flags_json(),
        CHART / "files" / "models.json": models.facts_json(),
        CHART / "files" / "warnings.json": kubernetes_checks.warnings_json(),
        # every rule table; the compiler keeps those of every engine and of Kubernetes
        CHART / "templates" / "_rules.tpl": rules.helm_template(
            checks.RULES + kubernetes_rules.RULES + slurm_checks.RULES, json.loads(chart_files.chart_json())),
        CHART / "files" / "image-variants.json": images.variants_json(),
        CHART / "files" / "kubernetes-versions.json": kubernetes_versions.chart_json(),
        ROOT / "docs" / "kubernetes.md": failure_docs.page((ROOT / "docs" / "kubernetes.md").read_text()),
        ROOT / "scripts" / "lib" / "contract.sh": chart_files.shell_facts(),
        # each Kubernetes target's row, at the end of its own Helm template
        **{CHART / targets.chart_template_path(name): targets.chart_template(
            name, (CHART / targets.chart_template_path(name)).read_text()) for name in targets.KUBERNETES},
    }


def stale(wanted: dict[Path, str]) -> list[Path]:
    return [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    args = parser.parse_args()
    wanted = outputs()
    paths = stale(wanted)
    if args.check:
        if paths:
            names = ", ".join(str(path.relative_to(ROOT)) for path in paths)
            sys.exit(f"out of date: {names}; run `make generate` (python scripts/generate.py)")
        return
    for path in paths:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
