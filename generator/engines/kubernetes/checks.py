"""The rules of the Kubernetes targets' values, each problem as "$.json.path: message", and what
valid values still lose there (warnings). Called through the dispatcher after generator/checks.py's
rules; the Helm chart's templates/_validate.tpl and NOTES.txt enforce and say the same.
"""

from __future__ import annotations

import json

from trainer.contract import PATH_FLAGS

from .policy import BUCKET_CREDENTIALS_ENV, DNS_LABEL_MAX, RENDERED_ENV

from ...names import outputs_claim
from ...paths import go_clean
from ...program import OWN_PROGRAM_WARNING
from ...targets import target, workload
from . import kueue
from .hosts import longest_hostname
from .render import PodContext

EMPTYDIR_WARNING = ("checkpoint.dir is an emptyDir: a restarted pod starts over at step 0, and the checkpoints, "
                    "metrics and model are lost with the pods; set persistence.enabled=true (or checkpoint.volume) "
                    "to keep them")


def errors(values: dict) -> list[str]:
    """Rules across fields for the pods of a Kubernetes target. Assumes the values passed the schema."""
    found = _name_errors(values)
    if not values["data"]["download"] and not values["data"]["volume"]:
        found.append("$.data.volume: with data.download false the data must come from a volume "
                     "(set data.volume, or data.download true)")
    for i, entry in enumerate(values.get("env") or []):
        if entry.get("name") in RENDERED_ENV:
            found.append(f"$.env[{i}].name: {entry['name']} is set by the job itself; a container takes each name once")
        elif values["outputs"]["secret"] and entry.get("name") in BUCKET_CREDENTIALS_ENV:
            found.append(f"$.env[{i}].name: {entry['name']} is set from outputs.secret; a container takes each name "
                         "once")
    return found + _metrics_errors(values) + _path_flag_errors(values)


def _name_errors(values: dict) -> list[str]:
    """The longest pod name (or hostname, where the pods are named after it) within a DNS label."""
    suffix = workload(values).hosts.pod_name_suffix
    hostname = longest_hostname(values)
    longest, what = (hostname + suffix, "pod name") if suffix else (hostname, "pod hostname")
    if len(longest) <= DNS_LABEL_MAX:
        return []
    return [f"$.name: {what} {longest!r} would be {len(longest)} characters "
            f"(limit {DNS_LABEL_MAX}); shorten name by {len(longest) - DNS_LABEL_MAX}"]


def _metrics_errors(values: dict) -> list[str]:
    """The metrics port is not the coordinator's; a PodMonitor needs it declared on the pods."""
    found, metrics = [], values["metrics"]
    port = metrics["port"]
    if port and port == (workload(values).engine_port or values["coordinator_port"]):
        found.append(f"$.metrics.port: {port} is the coordinator's port; choose another")
    if metrics["pod_monitor"]:
        if not port:
            found.append("$.metrics.pod_monitor: needs metrics.port (the PodMonitor scrapes it)")
        elif target(values).workload.runtime and not values["trainjob"]["own_runtime"]:
            found.append("$.metrics.pod_monitor: a PodMonitor scrapes a declared container port, which a TrainJob's "
                         "runtime patch cannot declare; set trainjob.own_runtime true (its runtime declares it), or "
                         "scrape through the pods' prometheus.io annotations")
    return found


def _path_flag_errors(values: dict) -> list[str]:
    """A path the built-in trainer's program.args give (--metrics-file, …) on none of the pod's volumes:
    the root filesystem is read-only, so the pods would fail as they start. A relative path is taken
    from the image's working directory, on the root filesystem too."""
    if values["program"]["command"]:
        return []
    mounts = [go_clean(mount["mountPath"]) for mount in PodContext(values).volume_mounts()]
    found, args = [], values["program"]["args"]
    for i, arg in enumerate(args):
        for option in PATH_FLAGS:
            if arg == option and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(option + "="):
                value = arg[len(option) + 1:]
            else:
                continue
            path = go_clean(value)
            if value and not (value.startswith("/") and any(path == m or path.startswith(m + "/") for m in mounts)):
                found.append(f"$.program.args[{i}]: {option} {value} is on none of the pod's volumes "
                             f"({', '.join(mounts)}); give a path under one of them")
    return found


def warnings(values: dict) -> list[str]:
    """The job's outputs on a volume that dies with its pod (and in no bucket); a queue that a stock Kueue
    ignores for this kind."""
    found = []
    volume = values["checkpoint"]["volume"]
    if not outputs_claim(values) and not values["outputs"]["uri"] and (not volume or "emptyDir" in volume):
        found.append(EMPTYDIR_WARNING)
    if kueue.unmanaged(values):
        found.append(kueue.UNMANAGED_WARNING)
    return found


def warnings_json() -> str:
    """The warnings' texts as the chart's NOTES.txt reads them (files/warnings.json, make generate)."""
    return json.dumps({"emptydir": EMPTYDIR_WARNING, "own_program": OWN_PROGRAM_WARNING,
                       "kueue_unmanaged": kueue.UNMANAGED_WARNING}, indent=1) + "\n"
