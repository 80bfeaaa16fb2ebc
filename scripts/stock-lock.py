#!/usr/bin/env python3
"""Write charts/jax-training/shipped/stock-requirements.txt (jaxgen reads it through generator/data/): what a stock image's pods install when the
image lacks it (image.source stock), each package at its version of trainer/constraints.txt with the
sha256 of every Linux wheel PyPI has of it (x86_64 and aarch64, CPython 3.11 to 3.14), for pip's
--require-hashes. Run it by hand (it reads PyPI) after changing trainer/constraints.txt; a test fails
while the two disagree on a version.

Usage: python scripts/stock-lock.py
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "charts" / "jax-training" / "shipped" / "stock-requirements.txt"
CONSTRAINTS = ROOT / "trainer" / "constraints.txt"
# The trainer extra's packages (pyproject.toml) and what they need, in install order; the s3 extra
# (boto3) is left out: a stock image's job keeps its outputs on a volume.
PACKAGES = ["numpy", "ml_dtypes", "opt_einsum", "scipy", "jaxlib", "jax", "absl-py", "optax", "tqdm",
            "safetensors", "pillow", "prometheus-client"]
# Versions of the packages constraints.txt leaves to pip: those the wheelhouse and the image resolve.
UNPINNED = {"ml_dtypes": "0.6.0", "opt_einsum": "3.4.0", "scipy": "1.17.1", "absl-py": "2.5.1"}
WHEEL = re.compile(r"-(?:cp31[0-4]|py3|py2\.py3)-(?:cp31[1-4]|abi3|none)-(?:any|manylinux\S*(?:x86_64|aarch64))\.whl$")


def pinned() -> list[tuple[str, str, str]]:
    """(name, version, marker) of each package, as constraints.txt pins it."""
    rows = []
    for line in CONSTRAINTS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^;\s]+)\s*(?:;\s*(.+))?$", line.strip())
        if match:
            rows.append((match.group(1), match.group(2), match.group(3) or ""))
    return rows


def hashes(name: str, version: str) -> list[str]:
    with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as reply:
        files = json.load(reply)["releases"].get(version, [])
    found = sorted(f["digests"]["sha256"] for f in files if WHEEL.search(f["filename"]))
    if not found:
        sys.exit(f"no Linux wheel of {name}=={version} on PyPI")
    return found


def main() -> None:
    rows = pinned()
    lines = ["# Written by scripts/stock-lock.py from trainer/constraints.txt; do not edit."]
    for package in PACKAGES:
        found = [row for row in rows if row[0] == package] or [(package, UNPINNED[package], "")]
        for name, version, marker in found:
            lines.append(f"{name}=={version}" + (f" ; {marker}" if marker else "") + "".join(
                f" --hash=sha256:{digest}" for digest in hashes(name, version)))
    LOCK.write_text("\n".join(lines) + "\n")
    print(f"wrote {LOCK.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
