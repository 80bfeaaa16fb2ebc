"""The release's namespace and the outputs claim, which the rules of every engine read (pod hostnames
are the Kubernetes engine's: generator/engines/kubernetes/hosts.py).
"""

from __future__ import annotations

DEFAULT_NAMESPACE = "default"  # the release's namespace when none is given, as in Helm


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

