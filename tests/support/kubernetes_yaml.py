"""YAML decoded the way Kubernetes decodes it: scripts/yaml-decode (apimachinery's YAMLReader and
sigs.k8s.io/yaml, the reader of kubectl, Helm and client-go), built by scripts/tools.sh. PyYAML is not
that reader: it takes 3e-05, y or 0o17 for strings where Go reads numbers and booleans."""

from __future__ import annotations

import json
import subprocess

from .paths import tool

TIMEOUT = 60  # seconds; a stream decodes in milliseconds


def decode(text: str) -> list:
    """The documents of a YAML stream as the JSON a Kubernetes client would send (empty ones skipped)."""
    proc = subprocess.run([tool("yaml-decode")], input=text.encode(), capture_output=True, timeout=TIMEOUT)
    if proc.returncode:
        raise ValueError(f"Kubernetes cannot read this YAML: {proc.stderr.decode().strip()}")
    return [json.loads(line) for line in proc.stdout.decode().split("\n") if line]  # not splitlines: U+0085


def as_json(docs) -> list:
    """`docs` as JSON data (what the decoded stream must equal)."""
    return json.loads(json.dumps(docs))


def assert_read_as_written(text: str, docs: list) -> None:
    """Kubernetes reads `text` back as exactly `docs`: every string a string, every number a number."""
    assert decode(text) == as_json(docs)
