"""Every problem with a set of variables, each as "$.json.path: message".

schema_errors() applies the complete schema (the chart's values.schema.json, written from
variables/schema.json by scripts/generate.py); semantic_errors() the rules a schema cannot say.
Then the rules of the target's engine (generator/engines/, errors(values)). The Helm chart's
templates/_validate.tpl enforces the same semantic rules.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from functools import lru_cache

import jsonschema
import re2

from trainer import models  # the model registry's facts (no jax import)
from trainer.contract import IMAGE_DIRS, INTERNAL_ENV, MAX_GPUS_PER_HOST, OUTPUT_FLAGS, PROCESS_ENV, SYSTEM_DIRS

from . import engines, images, set_values
from .engines.kubernetes.policy import (ANNOTATIONS_MAX_BYTES, DNS_SUBDOMAIN_MAX, GPU_RESOURCE, HUGE_PAGES_PREFIX,
                                        NATIVE_RESOURCE_DOMAIN, QUANTITY_SUFFIXES, STANDARD_RESOURCES)
from .errors import EXCERPT, excerpt
from .names import outputs_claim, rendered_claim
from .paths import SCHEMA_FILE, go_clean
from .program import OWN_PROGRAM_WARNING
from .targets import target

# A Kubernetes object name (DNS-1123 subdomain), as a PersistentVolumeClaim's claimName must be.
DNS_SUBDOMAIN = re2.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


@lru_cache(maxsize=None)
def _regex(pattern: str) -> "re2._Regexp":
    return re2.compile(pattern)


def _go_pattern(validator, pattern: str, instance, _schema):
    """`pattern` read as Helm and the API server read it, with Go's regexp (RE2): `$` is the end of the
    text (Python's `$` also matches before a trailing newline, so "name\n" would pass), and matching
    takes linear time whatever the input (a backtracking engine can be made to hang)."""
    if validator.is_type(instance, "string") and _regex(pattern).search(instance) is None:
        yield jsonschema.ValidationError(f"{_shown(instance)} does not match {json.dumps(pattern)}")


_Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _go_pattern})


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft7Validator:
    return _Validator(schema())


def json_path(parts) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{excerpt(str(part))}"
    return path


def _shown(value) -> str:
    """The user's value as they wrote it (JSON, not Python's repr: true, null, "text"), cut short."""
    return excerpt(json.dumps(value, ensure_ascii=False))


_SIZE_RULES = {"maxLength": ("characters", "at most"), "minLength": ("characters", "at least"),
               "maxItems": ("items", "at most"), "minItems": ("items", "at least"),
               "maxProperties": ("keys", "at most"), "minProperties": ("keys", "at least")}


def _message(error) -> str:
    """jsonschema's message, with the user's value quoted as an excerpt (its messages start with the
    value's repr, which may be megabytes); size rules say the size and the limit instead."""
    if error.validator in _SIZE_RULES:
        unit, bound = _SIZE_RULES[error.validator]
        return f"{len(error.instance)} {unit}, {bound} {error.validator_value} allowed"
    value, shown = repr(error.instance), _shown(error.instance)
    if error.validator == "oneOf" and any("pattern" in branch for branch in error.validator_value):
        return f"{shown} is not a Kubernetes quantity (such as 500m, 1.5Gi or 2)"  # Quantity's branches
    if error.validator == "enum":
        return f"{shown} is not one of {', '.join(_shown(choice) for choice in error.validator_value)}"
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{shown} is not of type {' or '.join(types)}"
    if error.message.startswith(value):
        return shown + error.message[len(value):]
    return error.message if len(error.message) <= 4 * EXCERPT else excerpt(error.message)


def schema_errors(values: dict) -> list[str]:
    errors = []
    for error in sorted(_validator().iter_errors(values), key=lambda e: list(map(str, e.absolute_path))):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # Name each unknown key's own path, so a typo points at itself.
            allowed = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - allowed):
                errors.append(f"{json_path(path + [key])}: unknown key{_suggestion(path + [key], allowed)}")
            continue
        if error.validator == "propertyNames":
            errors.append(f"{json_path(path)}: invalid key: {_message(error)}")
            continue
        errors.append(f"{json_path(path)}: {_message(error)}{_number_hint(error)}")
    return errors


# Keys that were renamed: the old dotted key, and the key that replaced it.
RENAMED = {
    "training.hidden_sizes": "training.mlp.hidden_sizes",
}


def _dotted(parts) -> str:
    """A path as --set spells it: training.mlp.hidden_sizes, program.args[0]."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _set_key(parts) -> str:
    """A path as a --set line takes it: a key's own . , = [ ] and backslash escaped with a backslash."""
    return "".join(f"[{p}]" if isinstance(p, int) else "." + re.sub(r"([.,=\[\]\\])", r"\\\1", str(p))
                   for p in parts).lstrip(".")


def _json_number(number: float) -> int | float:
    """A number as JSON writes it: an integral one without a fraction (010, 3.0 and 1e3 are 10, 3, 1000)."""
    return int(number) if number.is_integer() and abs(number) < 2 ** 53 else number


def _number_hint(error) -> str:
    """A number written where --set keeps it a string (Helm's --set types only integers: 0.05, 1e3
    and 010 stay strings): say how to give it as a number."""
    wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    if error.validator != "type" or not isinstance(error.instance, str) or not {"number", "integer"} & set(wanted):
        return ""
    try:
        number = float(error.instance)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""  # out of range however it is written (thousands of digits): no number to ask for
    if not isinstance(set_values.typed(error.instance), str):
        return ""  # --set would have typed it: it came quoted from a file or --set-string
    value = _json_number(number)
    refused = next(_validator().evolve(schema=error.schema).iter_errors(value), None)
    if refused is not None:  # the number itself is refused here too: a --set-json of it would fail
        return f"; --set keeps {excerpt(error.instance)} a string, as Helm does, and as a number {_message(refused)}"
    line = shlex.quote(f"{_set_key(error.absolute_path)}={json.dumps(value)}")
    return (f"; --set keeps {excerpt(error.instance)} a string, as Helm does: use "
            f"--set-json {line}, or write it unquoted in a variables file")


def _suggestion(parts: list, allowed: set[str]) -> str:
    renamed = RENAMED.get(_dotted(parts))
    if renamed:
        return f"; it was renamed: use {renamed}"
    key = parts[-1]
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(sorted(allowed))})"


def semantic_errors(values: dict) -> list[str]:
    """Rules across fields. Assumes the values passed the schema."""
    errors = []
    hosts, local = values["hosts_count"], values["local_device_count"]
    training = values["training"]
    devices = hosts * local

    if training["batch_size"] % devices:
        errors.append(f"$.training.batch_size: {training['batch_size']} is not divisible by the global device "
                      f"count {devices} (hosts_count {hosts} x local_device_count {local})")
    if 0 < training["train_examples"] < training["batch_size"]:
        errors.append(f"$.training.train_examples: {training['train_examples']} is less than one batch "
                      f"(training.batch_size {training['batch_size']})")
    if training["allreduce_dtype"] != "float32" and training["strategy"] != "pmap":
        errors.append(f"$.training.allreduce_dtype: {training['allreduce_dtype']} needs training.strategy 'pmap'")
    model = training["model_parallelism"]
    if model > 1:
        if training["strategy"] != "sharded":
            errors.append("$.training.model_parallelism: a model axis needs training.strategy 'sharded'")
        # the sizes the model's sharding rules split (trainer/models; the chart reads files/models.json)
        axis_setting = models.get(training["model"]).model_axis
        split_key, split = f"{training['model']}.{axis_setting}", training[training["model"]][axis_setting]
        if local % model or any(size % model for size in split):
            errors.append(f"$.training.model_parallelism: {model} must divide the local device count {local} "
                          f"(a model axis stays within one host) and each of training.{split_key} "
                          f"({','.join(str(size) for size in split)})")
        elif training["batch_size"] % (devices // model):
            errors.append(f"$.training.batch_size: {training['batch_size']} is not divisible by the data-parallel "
                          f"size {devices // model}")

    gpu = _gpu_resources(values["resources"])
    if values["accelerator"] == "gpu":
        if local > MAX_GPUS_PER_HOST:
            errors.append(f"$.local_device_count: {local} GPUs per host exceeds {MAX_GPUS_PER_HOST}")
        # The limit is set from local_device_count; an extended resource's request must equal its limit.
        for kind, count in gpu:
            if str(count) != str(local):
                errors.append(f"$.resources.{kind}.{GPU_RESOURCE}: {count} contradicts local_device_count {local} "
                              "(leave it out: it is set from local_device_count)")
    elif gpu:
        errors.append(f"$.resources.{gpu[0][0]}.{GPU_RESOURCE}: GPUs requested but accelerator is 'cpu'")

    errors += _request_errors(values["resources"])
    data, checkpoint = values["data"], values["checkpoint"]
    if go_clean(data["dir"]) == go_clean(checkpoint["dir"]):
        errors.append("$.checkpoint.dir: must differ from data.dir")
    for field, path in (("data.dir", data["dir"]), ("checkpoint.dir", checkpoint["dir"])):
        clean = go_clean(path)
        overlapped = [d for d in IMAGE_DIRS if clean == d or clean.startswith(d + "/") or d.startswith(clean + "/")]
        if clean in SYSTEM_DIRS:
            errors.append(f"$.{field}: '{path}' is a system directory; choose a directory of its own")
        elif overlapped:
            errors.append(f"$.{field}: '{path}' overlaps {overlapped[0]}, which the image or the kernel provides; "
                          "choose a directory of its own")
    for field in ("data.volume", "checkpoint.volume"):
        volume = values[field.split(".")[0]]["volume"]
        if len(volume) > 1:
            errors.append(f"$.{field}: give exactly one volume source, got {', '.join(sorted(volume))}")
        errors += _volume_source_errors(f"$.{field}", volume)
    errors += _persistence_errors(values)
    port = values["metrics"]["port"]
    if 0 < port < 1024:
        errors.append(f"$.metrics.port: {port} is a privileged port; use 1024-65535 (the pods run as non-root), "
                      "or 0 for no endpoint")
    first: dict[str, int] = {}
    for i, entry in enumerate(values.get("env") or []):  # every target: the trainer's own contract
        name = entry.get("name")
        if name in PROCESS_ENV:
            errors.append(f"$.env[{i}].name: {name} is set for each process by the job; "
                          "one value for every process would break the ranks")
        elif name in INTERNAL_ENV:
            errors.append(f"$.env[{i}].name: {name} is one of the trainer's internal variables, set by the job "
                          "or the trainer itself; choose another name")
        elif name in first:
            errors.append(f"$.env[{i}].name: {name} is already set by $.env[{first[name]}]; "
                          "a container takes each name once")
        first.setdefault(name, i)
    errors += images.repository_errors(values)
    if not values["program"]["command"]:  # the built-in trainer: its outputs go where the variables say
        for i, arg in enumerate(values["program"]["args"]):
            for option, variable in sorted(OUTPUT_FLAGS.items()):
                if arg == option or arg.startswith(option + "="):
                    errors.append(f"$.program.args[{i}]: {option} is set from {variable} (where jaxgen run and "
                                  f"run.sh find the results); set {variable} instead")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in values["annotations"].items())
    if size > ANNOTATIONS_MAX_BYTES:
        errors.append(f"$.annotations: {size} bytes of keys and values; Kubernetes allows {ANNOTATIONS_MAX_BYTES}")
    if values["slurm"]["nodes"] > hosts:
        errors.append(f"$.slurm.nodes: {values['slurm']['nodes']} nodes for {hosts} tasks leaves nodes idle")
    errors += engines.errors(values)  # the rules of the target's engine
    return errors


def _persistence_errors(values: dict) -> list[str]:
    """A claim for the outputs: on Kubernetes only, instead of checkpoint.volume, mountable by every pod."""
    persistence, errors = values["persistence"], []
    if not outputs_claim(values):
        return errors
    if values["checkpoint"]["volume"]:
        errors.append("$.persistence: the claim is mounted at checkpoint.dir, and so is checkpoint.volume; "
                      "set only one of them")
    hosts = values["hosts_count"]
    if rendered_claim(values) and persistence["access_mode"] == "ReadWriteOncePod" and hosts > 1:
        errors.append(f"$.persistence.access_mode: ReadWriteOncePod lets one pod mount the claim, but all {hosts} "
                      "pods mount it (use ReadWriteMany, or ReadWriteOnce with every pod on one node)")
    return errors


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
    """What valid values still lose or will not do: what the target's engine says (outputs on a volume
    that dies with its pod, a queue that is ignored), and a program of the user's own that cannot bring
    up distributed JAX by itself on this engine."""
    found = engines.warnings(values)
    if values["program"]["command"] and target(values).own_program_init:
        found.append(OWN_PROGRAM_WARNING % target(values).own_program_init)
    return found


def validation_errors(values: dict) -> list[str]:
    errors = schema_errors(values)
    return errors if errors else semantic_errors(values)
