"""What scripts/prepare.sh keeps beside the manifests, in BUILD/release/ (not applied with the job):
the merged variables, the release's identity for run.sh and clean.sh, and the pod through which
run.sh copies a job's results from its outputs claim."""

from __future__ import annotations

import json
import shlex

from .results import results_pod
from .targets import target as target_of


def release_files(values: dict) -> dict[str, str]:
    target = target_of(values)
    release = {"NAME": values["name"], "NAMESPACE": values["namespace"], "TARGET": values["target"],
               "HOSTS_COUNT": values["hosts_count"], **target.facts(values["name"])}
    files = {"release/values.json": json.dumps(values, indent=2) + "\n",
             "release/release.env": "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in release.items())}
    pod = results_pod(values) if target.kubernetes else None
    if pod:
        files["release/results-pod.json"] = json.dumps(pod, indent=2) + "\n"
    return files
