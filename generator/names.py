"""Resource names per engine, in one place, with the longest name each one produces.

The Jinja templates (via render.py) and the semantic checks use these; the Helm chart's
_helpers.tpl computes the same names.
"""

from __future__ import annotations

DNS_LABEL_MAX = 63


def coordinator_host(values: dict) -> str:
    """DNS name of process 0, as the other pods resolve it (pod hostname . Service subdomain)."""
    name, target = values["name"], values["target"]
    if target == "indexed-job":
        return f"{name}-0.{name}"
    if target == "jobset":
        return f"{name}-worker-0-0.{name}"
    if target == "jaxjob":
        return f"{name}-worker-0"
    raise ValueError(f"no coordinator host for target {target}")


def hostname(values: dict, index: int) -> str | None:
    """The hostname (a DNS-1123 label) of the pod of process `index`, or None for non-pod targets."""
    name = values["name"]
    return {
        "indexed-job": f"{name}-{index}",
        "jaxjob": f"{name}-worker-{index}",
        "jobset": f"{name}-worker-0-{index}",
    }.get(values["target"])


def longest_hostname(values: dict) -> str | None:
    """The longest pod hostname this render creates (the last index has the most digits)."""
    return hostname(values, values["hosts_count"] - 1)
