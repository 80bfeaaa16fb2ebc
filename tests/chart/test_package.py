"""`helm package` builds an archive that renders exactly as the chart directory does."""

from __future__ import annotations

import tarfile

import pytest
import yaml

from .cases import CASES
from .helm import CHART_DIR, helm, helm_template, release_name, write_values


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    out = tmp_path_factory.mktemp("package")
    result = helm("package", str(CHART_DIR), "--destination", str(out))
    assert result.returncode == 0, result.stderr
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    path = out / f"{chart['name']}-{chart['version']}.tgz"
    assert path.exists(), result.stdout
    return path


def test_archive_contents(archive):
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for required in ("Chart.yaml", "values.yaml", "values.schema.json", "README.md", "templates/_pod.tpl",
                     "templates/_validate.tpl", "templates/NOTES.txt", "templates/tests/test-coordinator.yaml"):
        assert f"jax-training/{required}" in names
    assert "jax-training/.kube-linter.yaml" not in names  # .helmignore keeps tooling out
    assert "jax-training/.checkov.yaml" not in names


PACKAGE_CASES = ["everything-indexed-job-gpu", "everything-jaxjob-cpu", "everything-jobset-gpu",
                 "indexed-job-cpu-1x1",
                 # an optional block's target rotates with the blocks listed before it
                 next(case for case in CASES if case.startswith("data-volume-no-download-"))]


@pytest.mark.parametrize("case", PACKAGE_CASES)
def test_archive_renders_like_directory(archive, case, tmp_path):
    values = CASES[case]
    path = write_values(tmp_path, case, values)
    release = release_name(values["name"])
    from_dir = helm_template(release, path, extra=())
    from_archive = helm_template(release, path, chart=archive, extra=())
    assert from_dir.returncode == 0 and from_archive.returncode == 0, from_dir.stderr + from_archive.stderr
    assert from_archive.stdout == from_dir.stdout
    assert len(list(yaml.safe_load_all(from_dir.stdout))) >= 2


def test_archive_keeps_the_checks(archive, tmp_path):
    bad = write_values(tmp_path, "bad", {"hosts_count": 3})
    result = helm_template("bad", bad, chart=archive)
    assert result.returncode != 0 and "$.training.batch_size" in result.stderr
    schema_bad = write_values(tmp_path, "schema-bad", {"hosts_count": 0})
    assert helm_template("bad", schema_bad, chart=archive).returncode != 0
