"""checkov (scripts/tools.sh installs it), offline, on every target's render from both renderers (cpu
and gpu, a TrainJob with its own runtime, the chart's test hook): every Kubernetes check passes or
is skipped with its reason in charts/jax-training/.checkov.yaml. checkov does not read the pod
templates of custom resources (JAXJob, JobSet, TrainJob, TrainingRuntime), so each is also checked
as a Pod. No container of any render names an env variable twice (Helm 4's server-side apply
refuses it)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter

import pytest
import yaml

from generator.targets import KUBERNETES
from tests.support.jaxgen import jaxgen
from tests.support.manifests import CRD_FILES, pod_templates
from tests.support.paths import tool

from .cases import CASES
from .helm import CHART_DIR, helm_template, write_values

CONFIG = CHART_DIR / ".checkov.yaml"
CUSTOM_KINDS = {kind for _, kind in CRD_FILES}  # the targets' custom kinds and the TrainingRuntime


def _sets(*assignments: str) -> list[str]:
    return [arg for assignment in assignments for arg in ("--set", assignment)]


def _as_pods(doc: dict) -> list[dict]:
    """A custom resource's pod templates as Pods, named after it, for checkov's pod checks."""
    pods = []
    for i, template in enumerate(t for t in pod_templates([doc]) if "containers" in t.get("spec", {})):
        meta = doc["metadata"]
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{meta['name']}-{doc['kind'].lower()}-{i}",
                                  "namespace": meta["namespace"], "labels": template["metadata"].get("labels", {})},
                     "spec": template["spec"]})
    return pods


@pytest.fixture(scope="module")
def renders(tmp_path_factory) -> dict[str, list[dict]]:
    """Every render, by a name: jaxgen's and the chart's (with its test hook) of each target."""
    out: dict[str, list[dict]] = {}
    values_dir = tmp_path_factory.mktemp("values")
    for target in KUBERNETES:
        for accelerator in ("cpu", "gpu"):
            variants = [()] + ([("trainjob.own_runtime=true",)] if target == "trainjob" else [])
            for sets in variants:
                name = f"{target}-{accelerator}{'-own-runtime' if sets else ''}"
                result = jaxgen("render", "--target", target, *_sets(f"accelerator={accelerator}", *sets))
                assert result.exit_code == 0, result.stderr
                out[f"jaxgen-{name}"] = result.documents()
                values = {"target": target, "accelerator": accelerator,
                          **({"trainjob": {"own_runtime": True}} if sets else {})}
                chart = helm_template("ck", write_values(values_dir, name, values), extra=())
                assert chart.returncode == 0, chart.stderr
                out[f"chart-{name}"] = chart.documents()
    return out


@pytest.fixture(scope="module")
def checkov_report(renders, tmp_path_factory) -> dict:
    """checkov on every render, with no check skipped by the configuration (the tests apply its list),
    so that a skip no render needs any more shows."""
    folder = tmp_path_factory.mktemp("renders")
    for name, docs in renders.items():
        docs = docs + [pod for doc in docs if doc["kind"] in CUSTOM_KINDS for pod in _as_pods(doc)]
        (folder / f"{name}.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    config = yaml.safe_load(CONFIG.read_text())
    proc = subprocess.run([tool("checkov"), "--framework", *config["framework"], "--skip-download", "-d", str(folder),
                           "-o", "json"], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return report[0] if isinstance(report, list) else report


def _skip_list() -> list[str]:
    return yaml.safe_load(CONFIG.read_text())["skip-check"]


@pytest.mark.slow
def test_every_check_passes_or_is_skipped_with_a_reason(checkov_report):
    results = checkov_report["results"]
    failed = sorted({(c["check_id"], c["resource"]) for c in results["failed_checks"]
                     if c["check_id"] not in _skip_list()})
    assert failed == []
    assert checkov_report["summary"]["passed"] > 80 * len(KUBERNETES)
    checked = Counter(c["resource"].split(".")[0] for c in results["passed_checks"])
    assert {"Job", "Pod"} <= set(checked), checked  # the Indexed Job, the hook and the CRs' pods as Pods
    # the job's pods, the custom resources' as Pods included, are all selected by its NetworkPolicy
    isolated = {c["resource"] for c in results["passed_checks"] if c["check_id"] == "CKV2_K8S_6"}
    assert {f"Pod.default.jax-training-{kind.lower()}-0" for kind in ("JAXJob", "JobSet", "TrainJob")} <= isolated
    assert {(c["check_id"], c["resource"]) for c in results["skipped_checks"]} == {
        ("CKV2_K8S_6", "Pod.default.jax-training-test-coordinator")}  # its annotation says why


@pytest.mark.slow
def test_each_skip_is_needed_and_has_its_reason(checkov_report):
    """A skipped check still applies (a render fails it), and a comment above it says why."""
    failing = {c["check_id"] for c in checkov_report["results"]["failed_checks"]}
    assert set(_skip_list()) <= failing, set(_skip_list()) - failing
    lines = CONFIG.read_text().splitlines()
    for check in _skip_list():
        at = lines.index(f"  - {check}")
        assert lines[at - 1].strip().startswith("#"), f"{check} has no reason above it in {CONFIG.name}"


def _containers(doc: dict) -> list[dict]:
    found = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                found += [c for c in value if isinstance(c, dict)]
            else:
                found += _containers(value)
    elif isinstance(doc, list):
        for item in doc:
            found += _containers(item)
    return found


def _duplicate_env(docs: list[dict]) -> list[tuple[str, str]]:
    """(container, name) of each env name given twice in one container; a TrainJob's container is its
    pod patch merged with spec.trainer's env, as the runtime makes it."""
    merged = [{"spec": t["spec"]} for t in pod_templates(docs) if "containers" in t.get("spec", {})]
    return [(container.get("name", "?"), name) for doc in docs + merged for container in _containers(doc)
            for name, count in Counter(e["name"] for e in container.get("env", [])).items() if count > 1]


def test_no_container_names_an_env_variable_twice(renders):
    assert {name: _duplicate_env(docs) for name, docs in renders.items() if _duplicate_env(docs)} == {}
    assert all(_containers(docs) for docs in renders.values())


@pytest.mark.parametrize("case", sorted(c for c in CASES if "env" in c or "everything" in c))
def test_no_duplicate_env_names_in_the_matrix(case, tmp_path):
    result = jaxgen("render", str(write_values(tmp_path, case, CASES[case])))
    assert result.exit_code == 0, result.stderr
    assert _duplicate_env(result.documents()) == []
