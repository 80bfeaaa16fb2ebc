"""The chart tier's tools: helm, kubeconform and kube-linter as installed by scripts/tools.sh, and the
two front doors (`helm template` and jaxgen's render) reduced to comparable documents."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from generator import yaml_text
from generator.kubernetes_versions import SUPPORTED
from generator.output import dump_yaml
from generator.engines.kubernetes import render_documents
from generator.engines.kubernetes.policy import DNS_LABEL_MAX
from generator.values import load_values
from tests.support import kubernetes_yaml
from tests.support.paths import CACHE, CHART_DIR, tool

SCHEMAS = CACHE / "kubeconform-schemas"
# Versions the offline schemas are prepared for (KUBERNETES_SCHEMA_VERSIONS in scripts/tools.sh).
KUBERNETES_VERSIONS = SUPPORTED  # the lowest and newest supported Kubernetes
SCHEMA_LOCATIONS = (
    str(SCHEMAS / "{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"),
    str(SCHEMAS / "crds/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"),
)
TIMEOUT = 120  # seconds; any one tool run takes well under one

# The only differences allowed between the two renders (documented in the chart's README).
HELM_ONLY_LABELS = {"helm.sh/chart"}
MANAGED_BY = "app.kubernetes.io/managed-by"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def documents(self) -> list[dict]:
        """The rendered documents as Kubernetes reads them."""
        return kubernetes_yaml.decode(self.stdout)


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> Run:
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def helm(*args: str, stdin: str | None = None) -> Run:
    return run(tool("helm"), *args, stdin=stdin)


def release_name(name: str) -> str:
    """Helm limits release names to 53 characters; the objects are named by the `name` value anyway."""
    return name if len(name) <= 53 else name[:50].rstrip("-") + "-rl"


def helm_template(release: str, *values_files: str | Path, chart: str | Path = CHART_DIR,
                  extra: tuple[str, ...] = ("--skip-tests",)) -> Run:
    """`helm template RELEASE CHART -f F...`; the test hook is left out unless extra says otherwise."""
    args = ["template", release, str(chart)]
    for path in values_files:
        args += ["-f", str(path)]
    return helm(*args, *extra)


def kubeconform(manifests: str, kubernetes_version: str, skip: tuple[str, ...] = ()) -> Run:
    args = [tool("kubeconform"), "-strict", "-summary", "-output", "json",
            "-kubernetes-version", kubernetes_version]
    if skip:
        args += ["-skip", ",".join(skip)]
    for location in SCHEMA_LOCATIONS:
        args += ["-schema-location", location]
    return run(*args, "-", stdin=manifests)


def assert_refuses_target(result: Run, target: str) -> None:
    """The chart's answer to a target of another engine (it has no row): it fails, naming the target,
    the jaxgen command that renders it and where the targets the chart renders are listed."""
    assert result.returncode != 0
    assert f"target {target} renders no Kubernetes objects" in result.stderr, result.stderr
    assert f"`jaxgen render FILE --target {target}`" in result.stderr
    assert "the Kubernetes targets in the chart's README (helm show readme)" in result.stderr


def jaxgen_documents(*values_files: str | Path) -> list[dict]:
    """jaxgen's render of the files, as Kubernetes reads the YAML it writes."""
    return kubernetes_yaml.decode(dump_yaml(render_documents(load_values([str(p) for p in values_files], []))))


LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _strip_labels(node, engine: str) -> None:
    """Drop the engine's own labels wherever a labels map appears (after checking their values)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "labels" and isinstance(value, dict) and MANAGED_BY in value:
                expected = {"helm": "Helm", "jaxgen": "jaxgen"}[engine]
                assert value.pop(MANAGED_BY) == expected, value
                if engine == "helm":
                    for label in HELM_ONLY_LABELS:
                        value.pop(label, None)
                assert not HELM_ONLY_LABELS & set(value), value
                for label_value in value.values():  # what the API server accepts as a label value
                    assert len(label_value) <= DNS_LABEL_MAX and LABEL_VALUE.fullmatch(label_value), (key, label_value)
            _strip_labels(value, engine)
    elif isinstance(node, list):
        for value in node:
            _strip_labels(value, engine)


def comparable(docs: list[dict], engine: str) -> list[dict]:
    """Documents as data, sorted by kind and name, without the documented engine-specific labels."""
    docs = json.loads(json.dumps(docs))  # a private copy; also turns tuples into lists
    for doc in docs:
        _strip_labels(doc, engine)
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


def write_values(directory: Path, name: str, values: dict) -> Path:
    path = directory / f"{name}.json"
    # As JSON both readers take: Helm's (Go's YAML) refuses raw control characters and surrogate pairs.
    path.write_text(yaml_text.flow_value(values))
    return path


def copy_chart(destination: Path) -> Path:
    """A copy of the chart (for tests that must not touch the working tree)."""
    target = destination / "jax-training"
    shutil.copytree(CHART_DIR, target)
    return target
