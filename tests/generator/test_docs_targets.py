"""Every prose list of targets names every target of generator/targets.py: the README, the chart's
README and Chart.yaml, the package description and the --help of run.sh and clean.sh. A target added
to the table and not to these texts fails here.

A Kubernetes target is named by its kind (`JAXJob`, `TrainJob`; `Job` for the Indexed Job, plural
allowed), the others by their id (`SLURM`); the texts that list ids (`trainjob`) are checked for ids."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from typing import Callable

import pytest
import yaml

from generator import targets
from tests.support.paths import CHART_DIR, REPO_ROOT, SCRIPTS_DIR
from trainer.cluster import JAX


def between(text: str, start: str, end: str) -> str:
    """The part of `text` from `start` to the first `end` after it (the passage that lists targets)."""
    assert start in text, f"{start!r} not found: the passage was reworded; point this test at the new one"
    head = text.index(start) + len(start)
    assert end in text[head:], f"{end!r} not found after {start!r}"
    return text[head:text.index(end, head)]


def readme(start: str, end: str, name: str = "README.md") -> Callable[[], str]:
    return lambda: between((REPO_ROOT / name).read_text(), start, end)


def chart_readme() -> str:
    return between((CHART_DIR / "README.md").read_text(), "# jax-training Helm chart", "## What differs")


def chart_description() -> str:
    return yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["description"]


def package_description() -> str:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["description"]


def schema_target_description() -> str:
    return json.loads((REPO_ROOT / "variables" / "schema.json").read_text())["properties"]["target"]["description"]


def by_name(text: str, target: targets.Target) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(target.name)}(?![\w-])", text) is not None


def script_help(script: str, start: str) -> Callable[[], str]:
    def text() -> str:
        result = subprocess.run(["bash", str(SCRIPTS_DIR / script), "--help"],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        return between(result.stdout, start, ")")
    return text


def kubernetes() -> list[targets.Target]:
    return [t for t in targets.TARGETS.values() if t.kubernetes]


def every_target() -> list[targets.Target]:
    return list(targets.TARGETS.values())


def local() -> list[targets.Target]:
    return [t for t in targets.TARGETS.values() if t.kubernetes and t.workload.pod_spec_path]


def by_kind(text: str, target: targets.Target) -> bool:
    """Named as the engine names it: the kind, a whole word (plural allowed), else the id (any case)."""
    if target.kubernetes:
        return re.search(rf"\b{re.escape(target.workload.kind)}s?\b", text) is not None
    return re.search(rf"\b{re.escape(target.name)}\b", text, re.IGNORECASE) is not None


def by_id(text: str, target: targets.Target) -> bool:
    return f"`{target.name}`" in text or f"`target: {target.name}`" in text


def by_resource(text: str, resource: str) -> bool:
    """A kind clean.sh deletes, by its plural (`trainjobs.trainer.kubeflow.org`: TrainJobs)."""
    return re.search(rf"\b{re.escape(resource.split('.')[0])}\b", text, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Passage:
    text: Callable[[], str]
    targets: Callable[[], list[targets.Target]]
    mentions: Callable[[str, targets.Target], bool] = by_kind


PASSAGES = {
    "README intro": Passage(readme("Distributed JAX training on the engines", "from one variables file"),
                            every_target),
    "README diagram": Passage(readme("jaxgen render ──►", "\n"), kubernetes),
    "README target key": Passage(readme("| `target` |", "\n"), every_target, by_id),
    "own program pod specs": Passage(readme("through `program.command` for the", "pod specs", "docs/own-program.md"),
                                     local),
    "chart README targets": Passage(chart_readme, every_target, by_id),
    "Chart.yaml description": Passage(chart_description, kubernetes),
    "pyproject description": Passage(package_description, every_target),
    "schema's target description": Passage(schema_target_description, every_target, by_name),
    "run.sh --help": Passage(script_help("run.sh", "waits until the job ("), kubernetes),
    "clean.sh --help": Passage(script_help("clean.sh", "every object of the release ("), kubernetes),
}


def missing(passage: Passage) -> list[str]:
    text = passage.text()
    return [t.name for t in passage.targets() if not passage.mentions(text, t)]


@pytest.mark.parametrize("where", PASSAGES)
def test_every_target_is_named(where):
    absent = missing(PASSAGES[where])
    assert not absent, f"{where} does not name these targets of generator/targets.py: {absent}"


def test_clean_help_names_every_kind_it_deletes():
    text = script_help("clean.sh", "every object of the release (")()
    assert [r for r in targets.cleanup_resources() if not by_resource(text, r)] == []


def test_a_new_target_is_missing_everywhere(monkeypatch):
    """A row added to the table, and to no text, is reported by every passage that lists its kind."""
    rows = dict(targets.TARGETS)
    workload = targets.Workload("FluxJob", "fluxjobs.example.org", targets.Hosts(), "flux={name}", "Complete",
                                pod_spec_path=("spec",))
    rows["flux"] = targets.Target("flux", "kubernetes", "flux.yaml.j2", JAX, workload=workload)
    monkeypatch.setattr(targets, "TARGETS", rows)
    for where, passage in PASSAGES.items():
        assert missing(passage) == ["flux"], where
