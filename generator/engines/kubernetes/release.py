"""What scripts/prepare.sh keeps beside the manifests of a Kubernetes target, in BUILD/release/ (not
applied with the job): the release's record (generator/output.py) and the pod through which run.sh
copies a job's results from its outputs claim."""

from __future__ import annotations

import json

from ... import images
from ...names import results_claim
from ...output import release_record
from .render import PodContext

RESULTS_MOUNT = "/outputs"  # where the results pod mounts the claim (scripts/run.sh copies from there)


def release_files(values: dict) -> dict[str, str]:
    files = release_record(values)
    pod = results_pod(values)
    if pod:
        files["release/results-pod.json"] = json.dumps(pod, indent=2) + "\n"
    return files


RESULTS_SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(900)"


def results_pod(values: dict) -> dict | None:
    """A short-lived pod that mounts the job's outputs claim read-only, for scripts/run.sh to copy the
    results from once the job is done: the job's image (it has tar), restricted as the job's pods,
    named <name>-results and labelled as the release (clean.sh deletes it). None without a claim."""
    claim = results_claim(values)
    if not claim:
        return None
    context = PodContext(values)
    labels = context.labels("results")
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{values['name']}-results", "namespace": values["namespace"], "labels": labels},
        "spec": {
            "restartPolicy": "Never", "activeDeadlineSeconds": 900,
            "automountServiceAccountToken": False, "enableServiceLinks": False,
            "securityContext": context.pod_security_context(),
            "nodeSelector": values["node_selector"], "tolerations": context.tolerations(),
            "containers": [{
                "name": "results", "image": images.reference(values),
                "imagePullPolicy": images.pull_policy(values),
                # A handler for SIGTERM: as PID 1 without one the process ignores it, and deleting the
                # pod (run.sh once it has copied, clean.sh) waited out the whole grace period, 30 s.
                "command": ["python", "-c", RESULTS_SLEEPER],
                "securityContext": context.container_security_context(),
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "outputs", "mountPath": RESULTS_MOUNT, "readOnly": True}],
            }],
            "imagePullSecrets": context.pull_secrets(),
            "volumes": [{"name": "outputs", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
        },
    }
