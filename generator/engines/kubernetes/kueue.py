"""What a job queued to Kueue (queue_name set) carries, read by both renderers' twins: the queue and
priority labels on the job object, the object created suspended (Kueue un-suspends it once admitted;
rendered, so that the job is safe even where Kueue's defaulting webhook is not called), and the
topology request on its pod template. A stock Kueue (>= 0.19) leaves some kinds unmanaged: their
integration is off by default (generator/targets.py, kueue_opt_in)."""

from __future__ import annotations

from ...targets import workload

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-%s-topology"  # %s: kueue.topology_mode


UNMANAGED_WARNING = ("queue_name: a stock Kueue (0.19 or later) does not manage a JAXJob (its kubeflow.org/jaxjob "
                     "integration is disabled by default and deprecated), so this job is not queued and starts at "
                     "once; set kueue.jaxjob_integration=true if the cluster's Kueue enables it, or use target "
                     "indexed-job, jobset or trainjob")


def unmanaged(values: dict) -> bool:
    """Queued to a Kueue that, as far as the values say, ignores this kind."""
    return bool(values["queue_name"]) and workload(values).kueue_opt_in and not values["kueue"]["jaxjob_integration"]


def suspended(values: dict) -> bool:
    """Whether the job object is created suspended, for Kueue to admit."""
    return bool(values["queue_name"]) and not unmanaged(values)


def labels(values: dict) -> dict:
    """The job object's Kueue labels."""
    if not values["queue_name"]:
        return {}
    found = {QUEUE_LABEL: values["queue_name"]}
    if values["kueue"]["priority_class"]:
        found[PRIORITY_LABEL] = values["kueue"]["priority_class"]
    return found


def pod_annotations(values: dict) -> dict:
    """The pod template's topology request (Kueue's topology-aware scheduling)."""
    k = values["kueue"]
    if not (suspended(values) and k["topology"]):
        return {}
    return {TOPOLOGY_ANNOTATION % k["topology_mode"]: k["topology"]}
