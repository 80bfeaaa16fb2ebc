"""The Kubernetes types that values pass through (resources, env, volume sources, tolerations,
affinity, network policy peers and egress rules) as draft-07 `definitions`, from the strict JSON schemas that the kubernetes-validate
package bundles, so jaxgen and Helm refuse a typo such as `limts` or `opertor` with its JSON path
instead of the API server refusing the render. variables/schema.json refers to them as
#/definitions/<name>; scripts/generate.py adds them to the chart's values.schema.json.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

KUBERNETES_VERSION = "1.37.0"  # the newest the package bundles: fields a current API server accepts
CORE = "io.k8s.api.core.v1."
ROOTS = tuple(CORE + name for name in ("ResourceRequirements", "EnvVar", "Volume", "Toleration", "Affinity")) + (
    "io.k8s.api.networking.v1.NetworkPolicyPeer", "io.k8s.api.networking.v1.NetworkPolicyEgressRule")
VOLUME_SOURCE = CORE + "VolumeSource"  # a Volume without its name: what data.volume and checkpoint.volume hold
REF = re.compile(r"^(?:(?:https://kubernetes\.io)?/api/_definitions\.json)?#/\$defs/(.+)$")
# What the API server's validation adds to the OpenAPI types, so a value it would refuse at apply is
# refused at render, with its path: a quantity's grammar (resource.ParseQuantity) and the operators,
# effects and weights the core validation accepts (null stays allowed where the type allows it).
QUANTITY = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
API_RULES = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "oneOf": [{"type": ["string", "null"], "pattern": QUANTITY}, {"type": ["number", "null"]}]},
    CORE + "Toleration": {"properties": {
        "operator": {"enum": ["", "Exists", "Equal", None]},
        "effect": {"enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute", None]}}},
    CORE + "NodeSelectorRequirement": {"properties": {
        "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]}}},
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement": {"properties": {
        "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]}}},
    "io.k8s.api.networking.v1.NetworkPolicyPort": {"properties": {"protocol": {"enum": ["TCP", "UDP", "SCTP", None]}}},
    CORE + "PreferredSchedulingTerm": {"properties": {"weight": {"minimum": 1, "maximum": 100}}},
    CORE + "WeightedPodAffinityTerm": {"properties": {"weight": {"minimum": 1, "maximum": 100}}},
}


def _with_rules(name: str, definition: dict) -> dict:
    rules = API_RULES.get(name)
    if not rules:
        return definition
    if "oneOf" in rules:
        return {**definition, **rules}
    merged = copy.deepcopy(definition)
    for field, extra in rules["properties"].items():
        merged["properties"][field].update(extra)
    return merged


def _bundled() -> dict:
    import kubernetes_validate

    path = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
            / f"v{KUBERNETES_VERSION}-local-strict" / "_definitions.json")
    return json.loads(path.read_text())["$defs"]


def _rewrite(node, found: set[str]):
    """Drop descriptions, point refs at #/definitions and collect the names they reach."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "description":
                continue
            if key == "$ref" and isinstance(value, str) and (m := REF.match(value)):
                found.add(m.group(1))
                value = "#/definitions/" + m.group(1)
            out[key] = _rewrite(value, found)
        return out
    if isinstance(node, list):
        return [_rewrite(value, found) for value in node]
    return node


def definitions() -> dict:
    bundled, out = _bundled(), {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        found: set[str] = set()
        out[name] = _with_rules(name, _rewrite(bundled[name], found))
        todo += sorted(found)
    source = copy.deepcopy(out[CORE + "Volume"])
    source["properties"].pop("name")
    source["required"] = [r for r in source.get("required", []) if r != "name"]
    if not source["required"]:
        del source["required"]
    out[VOLUME_SOURCE] = source
    return dict(sorted(out.items()))

