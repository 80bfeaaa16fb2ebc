"""The release workflow (.github/workflows/release.yml): actionlint and zizmor (scripts/tools.sh
installs both) pass on it, and it builds with the script the tests build with and pushes what a
release is: both image variants and the chart as an OCI artifact."""

from __future__ import annotations

import subprocess

import yaml

from generator.images import VARIANTS
from tests.support.paths import REPO_ROOT, tool

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "release.yml"


def test_actionlint_passes():
    proc = subprocess.run([tool("actionlint"), "-no-color", str(WORKFLOW)], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_passes_offline():
    proc = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW)], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_planted_fault_is_caught_by_each_linter(tmp_path):
    bad = tmp_path / ".github" / "workflows" / "release.yml"
    bad.parent.mkdir(parents=True)
    # a tag name pasted into a shell script (template injection), and an undefined matrix key
    bad.write_text(WORKFLOW.read_text().replace('run: echo "$REGISTRY_TOKEN" | docker login',
                                                'run: echo ${{ github.ref_name }} ${{ matrix.nothing }} | docker login'))
    lint = subprocess.run([tool("actionlint"), "-no-color", str(bad)], capture_output=True, text=True, timeout=120)
    assert lint.returncode != 0 and "matrix.nothing" in lint.stdout, lint.stdout
    audit = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(bad)], capture_output=True,
                           text=True, timeout=120)
    assert audit.returncode != 0 and "template-injection" in audit.stdout + audit.stderr, audit.stdout


def test_it_pushes_both_variants_with_image_sh_and_the_chart_as_oci():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True]["push"]["tags"]  # "on" reads as True in YAML 1.1
    images = workflow["jobs"]["images"]
    assert sorted(images["strategy"]["matrix"]["variant"]) == sorted(VARIANTS.values())
    script = "\n".join(step.get("run", "") for step in images["steps"])
    assert 'scripts/image.sh --builder docker --variant "$VARIANT" --push' in script
    chart = "\n".join(step.get("run", "") for step in workflow["jobs"]["chart"]["steps"])
    assert "helm package charts/jax-training" in chart and 'helm push "dist/' in chart and "oci://" in chart
