"""The example variables files (variables/examples/), told apart by their target's row in the table."""

from __future__ import annotations

from pathlib import Path

from generator.targets import KUBERNETES
from generator.values import load_values

from .paths import EXAMPLES_DIR

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))


def target_of(path: Path) -> str:
    """The target an example renders for (the default where it names none)."""
    return load_values([str(path)])["target"]


KUBERNETES_EXAMPLES = [path for path in EXAMPLES if target_of(path) in KUBERNETES]
