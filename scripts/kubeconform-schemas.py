"""Lay out offline JSON schemas for kubeconform (no network at validation time).

Core kinds come from the schemas bundled in the `kubernetes-validate` wheel: each kind file there
references a shared `_definitions.json` by an absolute URL, so every kind is rewritten into a
standalone schema that embeds the definitions it reaches. CRDs (../shared/crds) are converted from
their `openAPIV3Schema` the way kubeconform's openapi2jsonschema does, strict: objects without
`x-kubernetes-preserve-unknown-fields` reject unknown fields.

Layout (use with two `-schema-location` templates, see SCHEMA_LOCATIONS in tests/chart):
  OUT/v<X.Y.Z>-standalone-strict/<kind>-<group>-<version>.json   core kinds
  OUT/crds/<group>/<kind>_<version>.json                          custom resources

Usage: python scripts/kubeconform-schemas.py OUT --kubernetes-version 1.30.0 [...] --crds DIR
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

# A kind file refers to "/api/_definitions.json#/$defs/X"; the definitions refer to each other as "#/$defs/X".
DEFS_REF_RE = re.compile(r"^(?:(?:https://kubernetes\.io)?/api/_definitions\.json)?#/\$defs/(.+)$")


def _bundled_schema_dir(version: str) -> Path:
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    wanted = f"v{version}-local-strict"
    path = root / wanted
    if not path.is_dir():
        have = sorted(p.name for p in root.iterdir() if p.name.endswith("-local-strict"))
        sys.exit(f"kubernetes-validate bundles no {wanted} (has: {', '.join(have)})")
    return path


def _rewrite_refs(node, found: set[str]):
    """Point every _definitions.json ref at the embedded #/$defs and collect the names."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            m = DEFS_REF_RE.match(ref)
            if m:
                node["$ref"] = "#/$defs/" + m.group(1)
                found.add(m.group(1))
        for value in node.values():
            _rewrite_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _rewrite_refs(value, found)


def standalone_core(src: Path, dst: Path) -> int:
    defs_doc = json.loads((src / "_definitions.json").read_text())
    defs = defs_doc["$defs"]
    # Rewrite the refs inside the definitions once and remember each definition's direct deps.
    deps: dict[str, set[str]] = {}
    for name, schema in defs.items():
        found: set[str] = set()
        _rewrite_refs(schema, found)
        deps[name] = found
    dst.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(src.glob("*.json")):
        if path.name in ("_definitions.json", "all.json"):
            continue
        schema = json.loads(path.read_text())
        found: set[str] = set()
        _rewrite_refs(schema, found)
        closure, todo = set(), list(found)
        while todo:
            name = todo.pop()
            if name in closure:
                continue
            closure.add(name)
            todo.extend(deps[name] - closure)
        schema.pop("$id", None)
        schema["$defs"] = {name: defs[name] for name in sorted(closure)}
        (dst / path.name).write_text(json.dumps(schema, separators=(",", ":")))
        count += 1
    return count


def _strict_openapi(node):
    """openAPIV3Schema -> JSON schema: int-or-string, nullable, and strict objects."""
    if isinstance(node, list):
        return [_strict_openapi(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict_openapi(v) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", False) or out.get("format") == "int-or-string":
        out.pop("type", None)
        out.pop("format", None)
        out["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_schemas(crd_dir: Path, dst: Path) -> int:
    count = 0
    for path in sorted(crd_dir.glob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            group = spec["group"]
            for version in spec["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema")
                if schema is None:
                    continue
                schema = _strict_openapi(copy.deepcopy(schema))
                schema["properties"]["apiVersion"]["enum"] = [f"{group}/{version['name']}"]
                for kind_name in (spec["names"]["kind"], *NAMESPACED_TWINS.get(spec["names"]["kind"], ())):
                    schema["properties"]["kind"]["enum"] = [kind_name]
                    out = dst / group / f"{kind_name.lower()}_{version['name']}.json"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps(schema, separators=(",", ":")))
                    count += 1
    return count


# Kinds whose CRD ../shared/crds lacks but whose spec is a listed kind's: a TrainingRuntime is a
# namespaced ClusterTrainingRuntime.
NAMESPACED_TWINS = {"ClusterTrainingRuntime": ("TrainingRuntime",)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kubernetes-version", action="append", required=True)
    parser.add_argument("--crds", type=Path, required=True)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap in at the end, so a partial run never looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=args.out.name + ".", dir=args.out.parent))
    try:
        for version in args.kubernetes_version:
            n = standalone_core(_bundled_schema_dir(version), tmp / f"v{version}-standalone-strict")
            print(f"core schemas v{version}: {n}", file=sys.stderr)
        n = crd_schemas(args.crds, tmp / "crds")
        print(f"CRD schemas: {n}", file=sys.stderr)
        if args.out.exists():
            shutil.rmtree(args.out)
        os.replace(tmp, args.out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
