"""Locations every tier uses."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = (REPO_ROOT / ".." / "shared").resolve()
MNIST_DIR = SHARED_DIR / "data" / "mnist"
CRDS_DIR = SHARED_DIR / "crds"
EXAMPLES_DIR = REPO_ROOT / "variables" / "examples"
BAD_INPUTS_DIR = REPO_ROOT / "tests" / "generator" / "bad_inputs"
