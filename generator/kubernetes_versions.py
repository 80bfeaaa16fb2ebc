"""The Kubernetes versions the renders are for, stated once: `make generate` writes the chart's
kubeVersion from LOWEST (scripts/chart_version.py), and the tests validate every render against the
strict schemas of both ends."""

import json
import re

# Job.spec.successPolicy (the Indexed Job's) is beta and on by default from 1.31; 1.30 has the field
# only behind an alpha gate that is off, and would silently drop it.
LOWEST = "1.31.0"
NEWEST = "1.37.0"  # the newest schemas kubernetes-validate bundles
SUPPORTED = (LOWEST, NEWEST)
# containers[].restartPolicy and restartPolicyRules: beta and on by default from 1.35 (ContainerRestartRules);
# 1.34 drops them with its alpha gate off, older API servers refuse them as unknown fields.
CONTAINER_RESTART_RULES = "1.35.0"


def parse(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a Kubernetes version as kube_version or an API server gives it
    ("1.35", "v1.35.2-gke.100"); the schema's pattern has checked kube_version's form. ValueError for
    another text (an API server's that does not start so, in ASCII digits: \\d would take any Unicode digit)."""
    match = re.match(r"v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", version)
    if not match or len(version) > 64:  # kube_version's maxLength (int() refuses thousands of digits)
        raise ValueError(f"{version[:64]!r} is not a Kubernetes version")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def at_least(version: str, since: str) -> bool:
    """Whether `version` (empty: NEWEST, as for jaxgen render) has what came in `since`."""
    return parse(version or NEWEST) >= parse(since)


def chart_json() -> str:
    """charts/jax-training/files/kubernetes-versions.json: the versions as the chart's templates read them."""
    return json.dumps({"lowest": LOWEST, "newest": NEWEST, "containerRestartRules": CONTAINER_RESTART_RULES},
                      indent=1) + "\n"

if __name__ == "__main__":
    print(*SUPPORTED)  # scripts/tools.sh lays out kubeconform schemas for these
