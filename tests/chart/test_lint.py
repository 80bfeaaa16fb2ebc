"""helm lint --strict, kubeconform (strict, offline) on every render, kube-linter on the chart and on
the renders of every target; each tool is also shown to catch a planted fault."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml

from generator.targets import KUBERNETES
from tests.support.examples import KUBERNETES_EXAMPLES
from tests.support.manifests import CRD_FILES

from .cases import BASE_KEYS, CASES
from .helm import CHART_DIR, KUBERNETES_VERSIONS, helm, helm_template, kubeconform, release_name, run, tool, write_values

KUBE_LINTER_CONFIG = CHART_DIR / ".kube-linter.yaml"
K8S_EXAMPLES = KUBERNETES_EXAMPLES


@pytest.fixture(scope="module")
def values_files(tmp_path_factory) -> tuple[Path, ...]:
    directory = tmp_path_factory.mktemp("cases")
    return tuple(K8S_EXAMPLES + [write_values(directory, case, values) for case, values in sorted(CASES.items())])


@pytest.fixture(scope="module")
def renders_for(values_files):
    """Every example and hand-picked case rendered by helm for a Kubernetes version (helm's
    --kube-version: what the chart renders depends on it), test hook included, as one stream."""
    @functools.cache
    def render(version: str) -> str:
        chunks = []
        for path in values_files:
            name = json.loads(path.read_text()).get("name", "jax-training")
            result = helm_template(release_name(name), path, extra=("--kube-version", version))
            assert result.returncode == 0, f"{path.name}: {result.stderr}"
            chunks.append(result.stdout)
        return "\n---\n".join(chunks)
    return render


@pytest.fixture(scope="module")
def all_renders(renders_for) -> str:
    """The renders for the newest supported Kubernetes."""
    return renders_for(KUBERNETES_VERSIONS[-1])


def _lint_problems(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"\[(WARNING|ERROR)\]", line)]


def test_helm_lint_strict_defaults():
    result = helm("lint", "--strict", str(CHART_DIR))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert _lint_problems(result.stdout) == []


@pytest.mark.parametrize("path", K8S_EXAMPLES, ids=lambda p: p.name)
def test_helm_lint_strict_examples(path):
    result = helm("lint", "--strict", str(CHART_DIR), "-f", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _lint_problems(result.stdout) == []


@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("everything-")))
def test_helm_lint_strict_every_block_on(case, tmp_path):
    result = helm("lint", "--strict", str(CHART_DIR), "-f", str(write_values(tmp_path, case, CASES[case])))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _lint_problems(result.stdout) == []


def test_helm_lint_catches_bad_values(tmp_path):
    result = helm("lint", "--strict", str(CHART_DIR), "-f", str(write_values(tmp_path, "bad", {"hosts_count": 0})))
    assert result.returncode != 0
    assert "/hosts_count" in result.stdout
    # Helm's lint mode turns `fail` into a log line instead of an error (install/template do stop):
    # the semantic checks still speak.
    result = helm("lint", "--strict", str(CHART_DIR), "-f", str(write_values(tmp_path, "semantic", {"hosts_count": 3})))
    assert "$.training.batch_size: 128 is not divisible" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_kubeconform_every_render(renders_for, values_files, version):
    all_renders = renders_for(version)
    # No offline schema of the Prometheus Operator's CRDs: the PodMonitor's shape is checked by
    # tests/generator/test_metrics_render.py (and its parity here by test_parity.py).
    result = kubeconform(all_renders, version, skip=("PodMonitor",))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)["summary"]
    documents = [d for d in yaml.safe_load_all(all_renders) if d]
    monitors = sum(d["kind"] == "PodMonitor" for d in documents)
    assert summary == {"valid": len(documents) - monitors, "invalid": 0, "errors": 0, "skipped": monitors}
    kinds = {d["kind"] for d in documents}
    custom = {kind for _, kind in CRD_FILES}  # the targets' custom kinds and the TrainingRuntime
    assert kinds == {"Service", "Job", "PersistentVolumeClaim", *custom,
                     "Pod", "PodMonitor", "NetworkPolicy"}  # core kinds, the CRDs, the test hook, the opt-in monitor
    assert len(values_files) >= 30


@pytest.mark.slow
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_kubeconform_catches_faults(renders_for, version):
    all_renders = renders_for(version)
    """An unknown field in a core kind, a wrong type in a CRD, an unknown kind: all reported."""
    docs = [d for d in yaml.safe_load_all(all_renders) if d]
    job = next(d for d in docs if d["kind"] == "Job")
    jobset = next(d for d in docs if d["kind"] == "JobSet")
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicee"] = "Always"
    jobset["spec"]["failurePolicy"]["maxRestarts"] = "three"
    unknown = {"apiVersion": "example.com/v1", "kind": "Unknown", "metadata": {"name": "x"}}
    result = kubeconform(yaml.safe_dump_all([job, jobset, unknown]), version)
    assert result.returncode != 0
    summary = json.loads(result.stdout)["summary"]
    assert summary == {"valid": 0, "invalid": 2, "errors": 1, "skipped": 0}, result.stdout


def _kube_linter(*paths: str | Path):
    return run(tool("kube-linter"), "lint", "--config", str(KUBE_LINTER_CONFIG), *map(str, paths))


def test_kube_linter_chart():
    result = _kube_linter(CHART_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No lint errors found!" in result.stdout + result.stderr


@pytest.mark.slow
def test_kube_linter_every_target(values_files, tmp_path):
    """The chart directory is linted with its defaults only; these renders cover every target, cpu
    and gpu, one and many hosts, and the examples. (The optional blocks are left out: some checks
    flag the user's own choices by design, e.g. an env var read from a Secret, a service account or
    a priority class defined elsewhere, ttl_seconds_after_finished null.)"""
    base = {name for name, case in CASES.items() if set(case) == set(BASE_KEYS)}
    assert len(base) == 4 * len(KUBERNETES)
    chunks = []
    for path in values_files:
        if path in K8S_EXAMPLES or path.stem in base:
            name = json.loads(path.read_text()).get("name", "jax-training")
            result = helm_template(release_name(name), path, extra=())
            assert result.returncode == 0, result.stderr
            chunks.append(result.stdout)
    (tmp_path / "renders.yaml").write_text("\n---\n".join(chunks))
    result = _kube_linter(tmp_path / "renders.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No lint errors found!" in result.stdout + result.stderr


@pytest.mark.slow
def test_kube_linter_catches_faults(all_renders, tmp_path):
    job = next(d for d in yaml.safe_load_all(all_renders) if d and d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True, "allowPrivilegeEscalation": True}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(job))
    result = _kube_linter(tmp_path / "bad.yaml")
    assert result.returncode != 0
    assert "privileged-container" in result.stdout + result.stderr


def test_kube_linter_exclusions_are_documented():
    config = yaml.safe_load(KUBE_LINTER_CONFIG.read_text())
    assert config["checks"]["addAllBuiltIn"] is True
    readme = (CHART_DIR / "README.md").read_text()
    for check in config["checks"]["exclude"]:
        assert re.search(rf"^\| `{re.escape(check)}` \| .{{10,}} \|$", readme, re.M), \
            f"exclusion {check} has no reason in the chart README"
