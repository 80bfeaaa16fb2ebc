"""Every generated file is what scripts/generate.py writes from its one home (`make check-generated`),
and the check itself notices a stale or missing file without writing the tree."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "generate.py"


def _generate_module():
    spec = importlib.util.spec_from_file_location("generate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_file_is_current():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_check_names_stale_and_missing_files(tmp_path):
    generate = _generate_module()
    current, edited, missing = tmp_path / "current", tmp_path / "edited", tmp_path / "missing"
    current.write_text("a\n")
    edited.write_text("edited by hand\n")
    assert generate.stale({current: "a\n", edited: "b\n", missing: "c\n"}) == [edited, missing]


def test_the_generated_files_are_the_charts_and_the_scripts_copies():
    """Each chart file the templates read and each sourced shell fact file is generated (a new one
    that is not would drift unseen)."""
    generated = set(_generate_module().outputs())
    chart_files = set((REPO_ROOT / "charts" / "jax-training" / "files").iterdir())
    assert chart_files <= generated, sorted(map(str, chart_files - generated))
    hand_written = {"common.sh", "release.sh"}
    shell = {p for p in (REPO_ROOT / "scripts" / "lib").iterdir() if p.name not in hand_written}
    assert shell <= generated, sorted(map(str, shell - generated))
