"""The release's namespace and the outputs claim, which the rules of every engine read (pod hostnames
are the Kubernetes engine's: generator/engines/kubernetes/hosts.py).
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_NAMESPACE = "default"  # the release's namespace when none is given and the kube context has none


def context_namespace(environ=os.environ) -> str:
    """The release's namespace when none is given: the kube context's, else default, as `helm template`
    and kubectl read it (client-go's rules: the files of $KUBECONFIG, else ~/.kube/config, the first
    one that sets current-context or names a context winning). A file that cannot be read is no file."""
    from . import yaml_text

    paths = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p] or \
        [str(Path(environ.get("HOME") or Path.home()) / ".kube" / "config")]
    current, contexts = None, {}
    for path in paths:
        try:
            config = yaml_text.load(Path(path).read_text())
        except (OSError, UnicodeDecodeError, ValueError, yaml_text.yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        current = current or config.get("current-context")
        items = config.get("contexts")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                contexts.setdefault(item["name"], item.get("context"))
    context = contexts.get(current) if isinstance(current, str) else None
    namespace = context.get("namespace") if isinstance(context, dict) else None
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE


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

