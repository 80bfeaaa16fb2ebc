"""The chart's templates are named after their Jinja twins, the templates jaxgen renders the same
objects from: <x>.yaml.j2 is templates/<x>.yaml, a Jinja partial _<x>.j2 is templates/_<x>.tpl."""

from __future__ import annotations

from pathlib import Path

import generator
from generator.targets import TARGETS

from .helm import CHART_DIR

TEMPLATES = CHART_DIR / "templates"
JINJA = {path.name for path in Path(generator.__file__).parent.rglob("*.j2")}
# Workload-level files of the chart that no Jinja template mirrors (jaxgen checks in Python first).
HELM_ONLY = {"checks.yaml"}


def chart_twin(jinja_name: str) -> str:
    stem = jinja_name.removesuffix(".j2")
    return stem + ".tpl" if stem.startswith("_") else stem


def test_the_table_names_jinja_templates():
    assert {t.template for t in TARGETS.values()} <= JINJA


def test_every_kubernetes_template_has_its_chart_twin_and_no_other_workload_file():
    scripts = {t.template for t in TARGETS.values() if not t.kubernetes}  # rendered by jaxgen only
    twins = {chart_twin(name) for name in JINJA - scripts}
    chart = {path.name for path in TEMPLATES.glob("*.yaml")} | {path.name for path in TEMPLATES.glob("_*.tpl")}
    assert twins <= chart, "a Jinja template without its chart twin"
    assert {name for name in chart if name.endswith(".yaml")} - HELM_ONLY == {n for n in twins if n.endswith(".yaml")}
