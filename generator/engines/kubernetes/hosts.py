"""Pod hostnames (from the target table), with the longest name each target produces.

The renderer, the local runner and this engine's rules use these; the Helm chart's _names.tpl computes
the same names from its matching lookup.
"""

from __future__ import annotations

from ...targets import workload


def coordinator_host(values: dict) -> str:
    """DNS name of process 0, as the other pods resolve it (pod hostname . Service subdomain, or the
    render's coordinator Service)."""
    return workload(values).hosts.coordinator(values["name"])


def hostname(values: dict, index: int) -> str:
    """The hostname (a DNS-1123 label) of the pod of process `index`."""
    return workload(values).hosts.host(values["name"], index)


def longest_hostname(values: dict) -> str:
    """The longest pod hostname this render creates (the last index has the most digits)."""
    return hostname(values, values["hosts_count"] - 1)
