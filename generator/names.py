"""Pod hostnames per engine (from the target table), with the longest name each one produces.

The Kubernetes renderer (generator/engines/kubernetes/) and the semantic checks use these; the Helm chart's
_names.tpl computes the same names from its matching lookup.
"""

from __future__ import annotations

from .targets import target, workload
DEFAULT_NAMESPACE = "default"  # the release's namespace when none is given, as in Helm


def coordinator_host(values: dict) -> str:
    """DNS name of process 0, as the other pods resolve it (pod hostname . Service subdomain)."""
    return workload(values).hosts.coordinator(values["name"])


def hostname(values: dict, index: int) -> str | None:
    """The hostname (a DNS-1123 label) of the pod of process `index`, or None for non-pod targets."""
    t = target(values)
    return t.workload.hosts.host(values["name"], index) if t.kubernetes else None


def outputs_claim(values: dict) -> str:
    """The PersistentVolumeClaim mounted at checkpoint.dir by the persistence setting: an existing
    one, else the rendered <name>-outputs; "" when persistence is off."""
    persistence = values["persistence"]
    if persistence["existing_claim"]:
        return persistence["existing_claim"]
    return f"{values['name']}-outputs" if persistence["enabled"] else ""


def results_claim(values: dict) -> str:
    """The claim that holds the job's outputs after its pods are gone: the persistence claim, or a
    checkpoint.volume that is a claim; "" when the outputs are on a volume that goes with the pods."""
    return outputs_claim(values) or values["checkpoint"]["volume"].get("persistentVolumeClaim", {}).get("claimName", "")


def rendered_claim(values: dict) -> str:
    """The claim this render creates ("" when none: persistence off, or an existing claim)."""
    return "" if values["persistence"]["existing_claim"] else outputs_claim(values)


def longest_hostname(values: dict) -> str | None:
    """The longest pod hostname this render creates (the last index has the most digits)."""
    return hostname(values, values["hosts_count"] - 1)
