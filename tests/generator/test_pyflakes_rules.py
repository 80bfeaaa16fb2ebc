"""Every Python file of the repository passes ruff's pyflakes rules (F): no undefined name, no name
defined twice where the first is never used (a helper that shadows an imported one breaks its callers
only when they run, as a benchmark's report stamp once did), no unused import. A planted redefinition
shows the check fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

PYTHON_DIRS = ("benchmarks", "generator", "scripts", "tests", "trainer")


def ruff(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F",
                           "--output-format", "concise", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def test_the_repository_passes_the_pyflakes_rules():
    done = ruff(*(REPO_ROOT / d for d in PYTHON_DIRS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_shadowed_import_fails(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from time import time\n\n\ndef time(x):\n    return x\n")
    done = ruff(planted)
    assert done.returncode == 1 and "F811" in done.stdout, done.stdout + done.stderr
