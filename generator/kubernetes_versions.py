"""The Kubernetes versions the renders are for, stated once: `make generate` writes the chart's
kubeVersion from LOWEST (scripts/chart_version.py), and the tests validate every render against the
strict schemas of both ends."""

# Job.spec.successPolicy (the Indexed Job's) is beta and on by default from 1.31; 1.30 has the field
# only behind an alpha gate that is off, and would silently drop it.
LOWEST = "1.31.0"
NEWEST = "1.37.0"  # the newest schemas kubernetes-validate bundles
SUPPORTED = (LOWEST, NEWEST)

if __name__ == "__main__":
    print(*SUPPORTED)  # scripts/tools.sh lays out kubeconform schemas for these
