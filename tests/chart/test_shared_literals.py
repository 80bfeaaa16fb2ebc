"""A literal written by hand in both renderers (jaxgen's generator/ and the chart's templates), and
held by no generated fact, is a fact with two homes: the scan (scripts/renderer_census.py) finds each,
and each must be one of shared_literals.json, the ones not yet moved into a generated fact. That
list only shrinks: a literal that is no longer shared must leave it."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from tests.support.paths import REPO_ROOT

KNOWN = Path(__file__).with_name("shared_literals.json")
PLANTED = "planted-literal-of-both-trees"


def _census():
    spec = importlib.util.spec_from_file_location("renderer_census", REPO_ROOT / "scripts" / "renderer_census.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unlisted(root: Path) -> tuple[set[str], set[str]]:
    """(shared and not listed, listed and no longer shared)."""
    shared, known = _census().shared_literals(root), set(json.loads(KNOWN.read_text()))
    return shared - known, known - shared


def test_every_shared_literal_is_listed_and_every_listed_one_is_shared():
    assert _unlisted(REPO_ROOT) == (set(), set())


def _copy(root: Path) -> Path:
    for tree in ("generator", "charts/jax-training"):
        shutil.copytree(REPO_ROOT / tree, root / tree, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_planted_copy_in_both_trees_is_found(tmp_path):
    root = _copy(tmp_path)
    with (root / "generator" / "names.py").open("a") as jaxgen:
        jaxgen.write(f'\nPLANTED = "{PLANTED}"\n')
    with (root / "charts" / "jax-training" / "templates" / "_names.tpl").open("a") as chart:
        chart.write(f'{{{{- define "jax-training.planted" -}}}}{{{{ "{PLANTED}" }}}}{{{{- end -}}}}\n')
    assert _unlisted(root) == ({PLANTED}, set())
    # the same literal made a generated fact: one home, nothing to report
    (root / "charts" / "jax-training" / "files" / "planted.json").write_text(json.dumps({"planted": PLANTED}))
    assert _unlisted(root) == (set(), set())
