"""Locations every tier uses."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = (REPO_ROOT / ".." / "shared").resolve()
MNIST_DIR = SHARED_DIR / "data" / "mnist"
CRDS_DIR = SHARED_DIR / "crds"
EXAMPLES_DIR = REPO_ROOT / "variables" / "examples"
CHART_DIR = REPO_ROOT / "charts" / "jax-training"
SCRIPTS_DIR = REPO_ROOT / "scripts"
BAD_INPUTS_DIR = REPO_ROOT / "tests" / "generator" / "bad_inputs"
# The complete schema jaxgen and Helm validate with (variables/schema.json completed by scripts/generate.py).
SCHEMA_FILE = REPO_ROOT / "charts" / "jax-training" / "values.schema.json"
# The tools scripts/tools.sh installs.
CACHE = Path(os.environ.get("JAXT_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                            / "jax-training"))
BIN = CACHE / "bin"


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run scripts/tools.sh (make setup) first")
    return str(path)
