"""Build the variables of a render: defaults ← files ← --set overrides, then validate."""

from __future__ import annotations

import copy
import json
import sys
from functools import lru_cache
from typing import Any

import yaml

from . import yaml_text
from .checks import validation_errors
from .errors import UserError, ValidationFailed
from .paths import VALUES_FILE


@lru_cache(maxsize=1)
def _defaults() -> dict:
    return yaml_text.load(VALUES_FILE.read_text())


def defaults() -> dict:
    """The defaults of charts/jax-training/values.yaml (a fresh copy)."""
    return copy.deepcopy(_defaults())


def read_document(path: str) -> dict:
    """Read one variables file (JSON or YAML; "-" is stdin) into a mapping, or raise UserError."""
    label = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except FileNotFoundError:
        raise UserError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{label}: is a directory, not a variables file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{label}: cannot read: {exc}") from None
    if not text.strip():
        raise UserError(f"{label}: empty file (a variables file is a JSON or YAML mapping)")
    try:
        data = json.loads(text)
    except ValueError:
        data = _NOT_JSON
    if data is _NOT_JSON:
        try:
            data = yaml_text.load(text)
        except yaml.YAMLError as exc:
            raise UserError(f"{label}: not valid JSON/YAML{_where(exc)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{label}: $: expected a mapping of variables, got {_type_name(data)}")
    return data


_NOT_JSON = object()


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{at}: {problem}"


def parse_set(assignment: str) -> tuple[list[str], Any]:
    """Parse `a.b.c=value`; the value is read as YAML (numbers, booleans, null, {...}, [...])."""
    key, sep, raw = assignment.partition("=")
    path = key.split(".")
    if not sep or not key or any(not part for part in path):
        raise UserError(f"--set {assignment!r}: expected KEY.PATH=VALUE")
    try:
        value = yaml_text.load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not YAML: keep it as the literal string the user typed
    return path, value


def merge(base: dict, override: dict) -> dict:
    """Helm's merge: mappings merge key by key, anything else (lists included) is replaced.

    As in Helm, a null removes a default mapping (e.g. `resources: {requests: null}` drops the
    default requests). A null over a scalar stays null, which renders as Helm's missing key does.
    """
    merged = dict(base)
    for key, value in override.items():
        if value is None and isinstance(merged.get(key), dict):
            del merged[key]
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _set_path(values: dict, path: list[str], value: Any) -> dict:
    override: dict = {}
    node = override
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return merge(values, override)


def load_values(files: list[str], sets: list[str] = (), target: str | None = None) -> dict:
    """Merged and validated variables; raises UserError / ValidationFailed."""
    values = defaults()
    for path in files:
        values = merge(values, read_document(path))
    for assignment in sets:
        values = _set_path(values, *parse_set(assignment))
    if target is not None:
        values["target"] = target
    errors = validation_errors(values)
    if errors:
        raise ValidationFailed(errors)
    return values


def _type_name(value: Any) -> str:
    return {type(None): "null", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def dumps_schema() -> str:
    from .paths import SCHEMA_FILE
    return json.dumps(json.loads(SCHEMA_FILE.read_text()), indent=2)
