#!/usr/bin/env python3
"""Write the version of trainer/__init__.py (its one home) into the chart's version and appVersion,
and the lowest supported Kubernetes (generator/kubernetes_versions.py) into its kubeVersion. With
--check, exit 1 if Chart.yaml is out of date instead."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from generator.kubernetes_versions import LOWEST  # noqa: E402  (standard library only)
from trainer import __version__  # noqa: E402

CHART = ROOT / "charts" / "jax-training" / "Chart.yaml"


def updated(text: str) -> str:
    text = re.sub(r"(?m)^version: .*$", f"version: {__version__}", text)
    text = re.sub(r"(?m)^appVersion: .*$", f'appVersion: "{__version__}"', text)
    return re.sub(r"(?m)^kubeVersion: .*$", f'kubeVersion: ">={LOWEST}-0"', text)


def main() -> None:
    text = CHART.read_text()
    if updated(text) == text:
        return
    if "--check" in sys.argv[1:]:
        sys.exit(f"{CHART} is out of date: run make sync-schema")
    CHART.write_text(updated(text))


if __name__ == "__main__":
    main()
