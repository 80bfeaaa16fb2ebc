"""Where the project's data files live. generator/data/ holds symlinks to the one defaults file
(charts/jax-training/values.yaml) and the one schema (variables/schema.json); wheels copy them in."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
VALUES_FILE = PACKAGE_DIR / "data" / "values.yaml"
SCHEMA_FILE = PACKAGE_DIR / "data" / "schema.json"
