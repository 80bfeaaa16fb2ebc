"""The rules of the Kubernetes targets' values, each problem as "$.json.path: message", and what
valid values still lose there (warnings). Called through the dispatcher after generator/checks.py's
rules; the Helm chart's templates/_validate.tpl and NOTES.txt enforce and say the same.
"""

from __future__ import annotations

import json

import re2

from trainer.contract import PATH_FLAGS

from .policy import (ANNOTATIONS_MAX_BYTES, BUCKET_CREDENTIALS_ENV, DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, GPU_RESOURCE,
                     HUGE_PAGES_PREFIX, NATIVE_RESOURCE_DOMAIN, QUANTITY_SUFFIXES, RENDERED_ENV, STANDARD_RESOURCES)

from ... import rules, shipping
from ...names import outputs_claim
from ...paths import go_clean
from ...program import OWN_PROGRAM_WARNING
from ...targets import workload
from . import kueue
from .hosts import longest_hostname
from .render import PodContext
from .rules import RULES

# A Kubernetes object name (DNS-1123 subdomain), as a PersistentVolumeClaim's claimName must be.
DNS_SUBDOMAIN = re2.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")

EMPTYDIR_WARNING = ("checkpoint.dir is an emptyDir: a restarted pod starts over at step 0, and the checkpoints, "
                    "metrics and model are lost with the pods; set persistence.enabled=true (or checkpoint.volume) "
                    "to keep them")

UNBOUNDED_RESTARTS_WARNING = ("a JAXJob's training-operator counts no restart: a process that ends with 128 or more "
                              "(an OOM kill, a hang) restarts without end, whatever backoff_limit says; set "
                              "active_deadline_seconds to bound the job")


def errors(values: dict) -> list[str]:
    """Rules across fields for the pods of a Kubernetes target: RULES (compiled into the chart), then
    those the rule vocabulary cannot say. Assumes the values passed the schema."""
    found = rules.errors(RULES, values) + _name_errors(values) + _gpu_errors(values)
    found += _request_errors(values["resources"])
    for field in ("data", "checkpoint"):
        found += _volume_source_errors(f"$.{field}.volume", values[field]["volume"])
    size = sum(len(k.encode()) + len(v.encode()) for k, v in values["annotations"].items())
    if size > ANNOTATIONS_MAX_BYTES:
        found.append(f"$.annotations: {size} bytes of keys and values; Kubernetes allows {ANNOTATIONS_MAX_BYTES}")
    for i, entry in enumerate(values.get("env") or []):
        # a job that ships code sets PYTHONPATH to it (shipped.py); a second one would hide the trainer
        if entry.get("name") in RENDERED_ENV or (entry.get("name") == "PYTHONPATH" and shipping.shipped(values)):
            found.append(f"$.env[{i}].name: {entry['name']} is set by the job itself; a container takes each name once")
        elif values["outputs"]["secret"] and entry.get("name") in BUCKET_CREDENTIALS_ENV:
            found.append(f"$.env[{i}].name: {entry['name']} is set from outputs.secret; a container takes each name "
                         "once")
    return found + _path_flag_errors(values)


def _name_errors(values: dict) -> list[str]:
    """The longest pod name (or hostname, where the pods are named after it) within a DNS label."""
    suffix = workload(values).hosts.pod_name_suffix
    hostname = longest_hostname(values)
    longest, what = (hostname + suffix, "pod name") if suffix else (hostname, "pod hostname")
    if len(longest) <= DNS_LABEL_MAX:
        return []
    return [f"$.name: {what} {longest!r} would be {len(longest)} characters "
            f"(limit {DNS_LABEL_MAX}); shorten name by {len(longest) - DNS_LABEL_MAX}"]


def _gpu_errors(values: dict) -> list[str]:
    """The GPU's limit is set from local_device_count; an extended resource's request must equal its limit."""
    gpu, local = _gpu_resources(values["resources"]), values["local_device_count"]
    if values["accelerator"] != "gpu":
        return [f"$.resources.{gpu[0][0]}.{GPU_RESOURCE}: GPUs requested but accelerator is 'cpu'"] if gpu else []
    return [f"$.resources.{kind}.{GPU_RESOURCE}: {count} contradicts local_device_count {local} "
            "(leave it out: it is set from local_device_count)" for kind, count in gpu if str(count) != str(local)]


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


def _volume_source_errors(where: str, volume: dict) -> list[str]:
    """The sources jaxgen itself reads (run --local maps them to directories): well formed, and a
    claimName that is an object name, never a path."""
    errors = []
    if "persistentVolumeClaim" in volume:
        claim = volume["persistentVolumeClaim"]
        name = claim.get("claimName") if isinstance(claim, dict) else None
        if not isinstance(name, str) or len(name) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.search(name):
            errors.append(f"{where}.persistentVolumeClaim.claimName: must be a PersistentVolumeClaim name "
                          f"(lower-case DNS subdomain, at most {DNS_SUBDOMAIN_MAX} characters)")
    if "hostPath" in volume:
        host = volume["hostPath"]
        path = host.get("path") if isinstance(host, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            errors.append(f"{where}.hostPath.path: must be an absolute path")
    return errors


def _request_errors(resources: dict) -> list[str]:
    """What the API server refuses of the resources (the defaults' included): a name it does not know,
    a request above its limit, and a request of a resource it never overcommits (huge pages, a
    domain's own) without a limit equal to it. The GPU's limit is set from local_device_count."""
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    errors = [f"$.resources.{kind}.{name}: not a container resource: {', '.join(STANDARD_RESOURCES)}, "
              f"{HUGE_PAGES_PREFIX}<size> or a name with its domain (example.com/{name})"
              for kind, section in (("requests", requests), ("limits", limits)) for name in sorted(section)
              if "/" not in name and name not in STANDARD_RESOURCES and not name.startswith(HUGE_PAGES_PREFIX)]
    for name in sorted(requests):
        request, limit = requests[name], limits.get(name)
        if request is None or name == GPU_RESOURCE:
            continue
        exact = name.startswith(HUGE_PAGES_PREFIX) or ("/" in name and NATIVE_RESOURCE_DOMAIN not in name)
        if exact and limit is None:
            errors.append(f"$.resources.requests.{name}: {request} needs a limit equal to it "
                          f"(resources.limits.{name}); Kubernetes never overcommits {name}")
        elif exact and _quantity(request) != _quantity(limit):
            errors.append(f"$.resources.requests.{name}: {request} differs from its limit {limit} "
                          f"(resources.limits.{name}); Kubernetes never overcommits {name}")
        elif limit is not None and _quantity(request) > _quantity(limit):
            errors.append(f"$.resources.requests.{name}: {request} is more than its limit {limit} "
                          f"(resources.limits.{name}); Kubernetes refuses a request above its limit")
    return errors


def _quantity(value) -> float:
    """A Kubernetes quantity (500m, 1.5Gi, 2, 1e3) as a float, as the chart computes it."""
    text = str(value)
    suffix = next((s for s in sorted(QUANTITY_SUFFIXES, key=len, reverse=True) if text.endswith(s)), "")
    return float(text[:len(text) - len(suffix)]) * float(QUANTITY_SUFFIXES.get(suffix, "1"))


def _gpu_resources(resources: dict) -> list[tuple[str, object]]:
    """(section, count) for each of limits and requests that names GPU_RESOURCE."""
    return [(kind, resources[kind][GPU_RESOURCE]) for kind in ("limits", "requests")
            if isinstance(resources.get(kind), dict) and GPU_RESOURCE in resources[kind]]


def warnings(values: dict) -> list[str]:
    """The job's outputs on a volume that dies with its pod (and in no bucket); a queue that a stock Kueue
    ignores for this kind; restarts that nothing bounds."""
    found = []
    volume = values["checkpoint"]["volume"]
    if not outputs_claim(values) and not values["outputs"]["uri"] and (not volume or "emptyDir" in volume):
        found.append(EMPTYDIR_WARNING)
    if kueue.unmanaged(values):
        found.append(kueue.UNMANAGED_WARNING)
    if not workload(values).counts_restarts and values["active_deadline_seconds"] is None:
        found.append(UNBOUNDED_RESTARTS_WARNING)
    return found


def warnings_json() -> str:
    """The warnings' texts as the chart's NOTES.txt reads them (files/warnings.json, make generate)."""
    return json.dumps({"emptydir": EMPTYDIR_WARNING, "own_program": OWN_PROGRAM_WARNING,
                       "kueue_unmanaged": kueue.UNMANAGED_WARNING,
                       "unbounded_restarts": UNBOUNDED_RESTARTS_WARNING}, indent=1) + "\n"
