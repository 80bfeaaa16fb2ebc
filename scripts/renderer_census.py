#!/usr/bin/env python3
"""What the two renderers (jaxgen's generator/ and the Helm chart's templates) still write twice by hand.

Usage: python scripts/renderer_census.py [ROOT]   (ROOT: a checkout, this one by default; JSON on stdout)

- shared_literals: the literals of 6 or more characters written in both trees and absent from the
  generated facts. A literal is a string constant of generator/'s Python (f-strings' text parts), a
  quoted string of its Jinja templates or of the chart's hand-written templates, cut at its
  placeholders (%d, {x}, {{ x }}) and stripped. The generated facts are every string, key or value,
  of the chart's files/*.json, and the generated templates.
- chart_hand_written_lines: the lines of charts/jax-training/templates/ less the generated ones (a
  file that starts with the generated mark; a target template's row below its marker).
- key_files: for each KEY, the hand-written files outside tests/ and docs/ that spell it
  (`git grep -l -F KEY`, less the generated files and this script).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_LENGTH = 6
GENERATED_MARKS = ("{{/* Generated ",)
TARGET_ROW_MARKER = "{{/* The target's row (generator/targets.py)"
KEYS = ("hosts_count", "persistence", "outputs.uri")
# generated files that a key may appear in (scripts/generate.py writes them), and this script's KEYS
GENERATED_FILES = ("charts/jax-training/values.yaml", "charts/jax-training/values.schema.json",
                   "charts/jax-training/README.md", "charts/jax-training/files/", "scripts/lib/contract.sh",
                   "charts/jax-training/templates/_rules.tpl", "scripts/renderer_census.py")
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|%[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|\{[^{}]*\}")
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'([^\'\n]*)\'|`([^`]*)`')


def _fragments(text: str) -> set[str]:
    return {part.strip() for part in _PLACEHOLDER.split(text) if len(part.strip()) >= MIN_LENGTH}


def python_literals(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= _fragments(node.value)
    return found


def template_literals(text: str) -> set[str]:
    found = set()
    for match in _QUOTED.finditer(text):
        found |= _fragments(next(group for group in match.groups() if group is not None))
    return found


def hand_written_chart_templates(root: Path) -> dict[Path, str]:
    """Each chart template's hand-written text (a generated file's is empty)."""
    texts = {}
    for path in sorted((root / "charts" / "jax-training" / "templates").rglob("*")):
        if path.is_file():
            text = path.read_text()
            texts[path] = "" if text.startswith(GENERATED_MARKS) else text.split(TARGET_ROW_MARKER)[0]
    return texts


def _strings(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {s for value in node.values() for s in _strings(value)}
    if isinstance(node, list):
        return {s for value in node for s in _strings(value)}
    return {node} if isinstance(node, str) else set()


def generated_facts(root: Path) -> set[str]:
    facts = set()
    for path in (root / "charts" / "jax-training" / "files").glob("*.json"):
        facts |= _strings(json.loads(path.read_text()))
    return facts


def jaxgen_literals(root: Path) -> set[str]:
    found = set()
    for path in (root / "generator").rglob("*"):
        if path.suffix == ".py":
            found |= python_literals(path.read_text())
        elif path.suffix == ".j2":
            found |= template_literals(path.read_text())
    return found


def chart_literals(root: Path) -> set[str]:
    return {literal for text in hand_written_chart_templates(root).values() for literal in template_literals(text)}


def shared_literals(root: Path) -> set[str]:
    """The literals written by hand in both renderers that no generated fact holds."""
    return (jaxgen_literals(root) & chart_literals(root)) - generated_facts(root)


def chart_hand_written_lines(root: Path) -> int:
    return sum(len(text.splitlines()) for text in hand_written_chart_templates(root).values())


def key_files(root: Path, key: str) -> list[str]:
    listed = subprocess.run(["git", "grep", "-l", "-F", key, "--", ".", ":!tests", ":!docs"], cwd=root,
                            capture_output=True, text=True).stdout.split()
    return sorted(path for path in listed if not path.startswith(GENERATED_FILES))


def census(root: Path) -> dict:
    return {"shared_literals": len(shared_literals(root)),
            "chart_hand_written_lines": chart_hand_written_lines(root),
            "key_files": {key: len(key_files(root, key)) for key in KEYS}}


if __name__ == "__main__":
    print(json.dumps(census(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT), indent=1))
