"""Strict validation of rendered manifests: core kinds with kubernetes-validate's bundled
schemas, custom resources against the openAPIV3Schema of the CRDs in ../shared/crds."""

from __future__ import annotations

import copy
from functools import lru_cache

import jsonschema
import kubernetes_validate
import yaml

from generator.kubernetes_versions import SUPPORTED
from generator.engines.kubernetes import render_documents
from generator.targets import TARGETS, target
from generator.values import load_values

from .paths import CRDS_DIR

KUBERNETES_VERSIONS = tuple(v.rsplit(".", 1)[0] for v in SUPPORTED)  # as kubernetes-validate names them


def _crd_files() -> dict:
    """The CRD file of each custom kind a target creates, named as controller-gen names it
    (<group>_<plural>.yaml, from the row's plural.group), and of the runtime kind the table does not name."""
    files = {}
    for t in TARGETS.values():
        if t.kubernetes:
            plural, group = t.workload.resource.split(".", 1)
            if "." in group:  # a custom resource's group is a domain; a built-in one (batch) is not
                files[(group, t.workload.kind)] = f"{group}_{plural}.yaml"
    # ../shared/crds has no TrainingRuntime CRD; its spec schema is the ClusterTrainingRuntime's (the
    # e2e tier installs the release's own TrainingRuntime CRD, and its API server checks them too).
    files[("trainer.kubeflow.org", "TrainingRuntime")] = "trainer.kubeflow.org_clustertrainingruntimes.yaml"
    return files


CRD_FILES = _crd_files()


def _strict(schema: dict) -> dict:
    """Close every object that lists its properties and does not preserve unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@lru_cache(maxsize=None)
def crd_validator(group: str, kind: str, version: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((CRDS_DIR / CRD_FILES[(group, kind)]).read_text())
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema = _strict(entry["schema"]["openAPIV3Schema"])
            # apiVersion/kind/metadata are checked by the API server, not by the CRD schema.
            schema["properties"]["metadata"] = {"type": "object"}
            return jsonschema.Draft7Validator(schema)
    raise LookupError(f"{group}/{version} {kind}: version not in the CRD")


def validation_problems(doc: dict, kubernetes_version: str = "1.37") -> list[str]:
    """Every strict-validation problem of one manifest (empty = valid)."""
    group, _, version = doc["apiVersion"].rpartition("/")
    if (group, doc["kind"]) in CRD_FILES:
        validator = crd_validator(group, doc["kind"], version)
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    try:
        kubernetes_validate.validate(doc, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [str(error)]
    return []


@lru_cache(maxsize=None)
def default_kinds(name: str, *sets: str) -> tuple[str, ...]:
    """The kinds a render of target `name` with the defaults (and `sets`) creates, sorted: the kinds any
    render of that target must create, the job object's kind from the target's row once among them."""
    kinds = tuple(sorted(doc["kind"] for doc in render_documents(load_values([], [f"target={name}", *sets]))))
    assert kinds.count(target(name).workload.kind) == 1, kinds
    return kinds


def pod_templates(docs: list[dict]) -> list[dict]:
    """The pod templates (metadata and spec) of every workload among `docs`, of any target: where its
    row's pod spec sits, or the pod a runtime is asked for (a TrainJob's); of a kind no row names (an
    own TrainingRuntime), its spec.template."""
    workloads = {t.workload.kind: t.workload for t in TARGETS.values() if t.kubernetes}
    templates = []
    for doc in docs:
        w = workloads.get(doc["kind"])
        if w is None:
            templates += [doc["spec"]["template"]] if "template" in doc.get("spec", {}) else []
        elif w.pod_spec_path:
            node = doc
            for key in w.pod_spec_path[:-1]:
                node = node[key]
            templates.append(node)
        else:
            templates.append(trainjob_pod_template(doc))
    return templates


def trainjob_pod_template(trainjob: dict) -> dict:
    """The trainer pod a TrainJob asks its runtime for: the pod patch, its container patch merged
    with spec.trainer's image, command, args, env and resources (the runtime adds the rest)."""
    (patch,) = trainjob["spec"]["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    template = copy.deepcopy(job["template"]["spec"]["template"])
    trainer = trainjob["spec"]["trainer"]
    container = template["spec"]["containers"][0]
    container.update({k: copy.deepcopy(trainer[k]) for k in ("image", "command", "args", "env") if k in trainer})
    if "resourcesPerNode" in trainer:
        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    return template
