"""Kubernetes objects from validated variables: Jinja2 (StrictUndefined) -> YAML text -> parsed back."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import jinja2
import yaml

from trainer import contract, exit_codes
from trainer.cluster import JAX
from trainer.fencing import ATTEMPT_ENV
from trainer.rejoin import POD_UID_ENV
from trainer.supervisor import PEER_LOST_WAIT_ENV

from ... import __version__, images, kubernetes_versions, names, targets, yaml_text
from ...errors import TemplateBug
from ...output import dump_json, dump_json_list, dump_yaml, file_name
from ...program import device_env, program_args
from ...templating import environment
from . import kueue, policy
from .shipped import TEMPLATE as shipped_template, Shipped
from .hosts import coordinator_host
from .outputs import annotations as outputs_annotations

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
MANAGED_BY = "jaxgen"
CLAIM_TEMPLATE = "persistentvolumeclaim.yaml.j2"
POD_MONITOR_TEMPLATE = "podmonitor.yaml.j2"
NETWORK_POLICY_TEMPLATE = "networkpolicy.yaml.j2"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # every scalar and pass-through object: one flow value
    return environment(TEMPLATES_DIR, {"tojson": yaml_text.flow_value})


def version_label(tag: str) -> str:
    """The image tag as a label value (at most 63 characters, alphanumeric at both ends): a tag may be
    128 characters and end in "-" or ".". The chart's jax-training.labels does the same (trunc, trimAll)."""
    return tag[:policy.DNS_LABEL_MAX].strip("-_.")


class PodContext:
    """The computed pieces of a render (names, labels, args…), exposed to templates as functions."""

    def __init__(self, values: dict):
        self.v = values

    def selector_labels(self, component: str) -> dict:
        return {
            policy.NAME_LABEL: policy.APP_NAME,
            policy.INSTANCE_LABEL: self.v["name"],
            "app.kubernetes.io/component": component,
        }

    def labels(self, component: str, queue: bool = False) -> dict:
        # The user's labels first, so they can never override the ones the selectors rely on.
        labels = dict(self.v["labels"])
        labels.update(self.selector_labels(component))
        labels["app.kubernetes.io/version"] = version_label(images.tag(self.v))
        labels["app.kubernetes.io/managed-by"] = MANAGED_BY
        if queue:
            labels.update(kueue.labels(self.v))
        return labels

    def suspended(self) -> bool:
        """Created suspended for Kueue to admit (kueue.py)."""
        return kueue.suspended(self.v)

    def container_env(self) -> list[dict]:
        """The container's env: PYTHONUNBUFFERED where the engine does not set it, our JAX_* variables
        where it does not set those, the coordinator Service's address where the target has one, the
        gang's attempt and a lost peer's wait where the controller restarts it as a whole, the pod's UID
        where the container restarts in place, JAX_LOCAL_DEVICE_COUNT (every target: the devices each
        process expects), the bucket's credentials from outputs.secret, then the user's env."""
        set_by_engine = targets.workload(self.v).engine_env
        env = [] if policy.UNBUFFERED_ENV in set_by_engine else [{"name": policy.UNBUFFERED_ENV, "value": "1"}]
        env += self.process_env()
        if service := self.coordinator_service():  # read before the engine's own coordinator variable
            env.append({"name": JAX.coordinator, "value": f"{service['name']}:{int(self.v['coordinator_port'])}"})
        attempt = targets.workload(self.v).attempt_field
        if attempt:  # the gang's attempt, which fences off an older one's processes (trainer/fencing.py)
            env.append({"name": ATTEMPT_ENV, "valueFrom": {"fieldRef": {"fieldPath": attempt}}})
            # a gang restarted as a whole, on its first failed pod: a lost peer's wait (policy.py)
            env.append({"name": PEER_LOST_WAIT_ENV, "value": str(policy.PEER_LOST_WAIT_SECONDS)})
        if self.container_restart_rules():  # restarted in place, it waits for a lost peer (trainer/rejoin.py)
            env.append({"name": POD_UID_ENV, "valueFrom": {"fieldRef": {"fieldPath": policy.POD_UID_FIELD}}})
        name, value = device_env(self.v)
        env.append({"name": name, "value": value})
        if secret := self.v["outputs"]["secret"]:
            env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                    for key in policy.BUCKET_CREDENTIALS_ENV]
        return env + list(self.v["env"])

    def process_env(self) -> list[dict]:
        """The variables of the row's launcher (JAX_*) on our own targets; the process id comes from the
        Job's completion index. None (an empty list) where the engine sets them itself (a JAXJob's
        operator, a TrainJob's runtime)."""
        t = targets.target(self.v)
        if not t.process_env:
            return []
        env = t.launcher.env(0, int(self.v["hosts_count"]), coordinator_host(self.v),
                             int(self.v["coordinator_port"]))
        index = {"fieldRef": {"fieldPath": policy.COMPLETION_INDEX_FIELD}}
        return [{"name": name, "valueFrom": index} if name == t.launcher.process_id else {"name": name, "value": value}
                for name, value in env.items()]

    def coordinator_service(self) -> dict | None:
        """Where the target has one (targets.Hosts.service), the Service in front of process 0: its
        name and the labels of process 0's pod it selects."""
        w = targets.workload(self.v)
        if not w.hosts.service:
            return None
        return {"name": coordinator_host(self.v), "selector": w.process_labels(self.v["name"], 0),
                "annotations": policy.COORDINATOR_SERVICE_ANNOTATIONS}

    def target(self) -> SimpleNamespace:
        """The row's facts the templates read, by the names they use: the container port's name, a
        JobSet's replicated Job, and the Job, container and patch manager of the runtime that owns the
        pods ("" without one)."""
        w = targets.workload(self.v)
        runtime = w.runtime or targets.NO_RUNTIME
        return SimpleNamespace(port_name=w.port_name, replicated_job=w.hosts.replicated_job, runtime_job=runtime.job,
                               runtime_container=runtime.container, patch_manager=runtime.patch_manager)

    def container_command(self) -> list[str]:
        """The user's program (program.command), or the built-in trainer."""
        return list(self.v["program"]["command"]) or ["python", "-m", "trainer"]

    def container_args(self) -> list[str]:
        return program_args(self.v)

    def pod_security_context(self) -> dict:
        uid = policy.RUN_AS_ID
        return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid,
                "seccompProfile": {"type": "RuntimeDefault"}}

    def container_security_context(self) -> dict:
        return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]}}

    def pull_secrets(self) -> list[dict]:
        return [{"name": secret} for secret in self.v["image"]["pull_secrets"]]

    def volume_mounts(self) -> list[dict]:
        data = {"name": "data", "mountPath": self.v["data"]["dir"]}
        if not self.v["data"]["download"]:
            data["readOnly"] = True
        mounts = [data, {"name": policy.CHECKPOINTS_VOLUME, "mountPath": self.v["checkpoint"]["dir"]},
                  {"name": "tmp", "mountPath": "/tmp"}]
        if self.v["accelerator"] == "gpu":
            mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        return mounts

    def volumes(self) -> list[dict]:
        claim = names.outputs_claim(self.v)
        outputs = {"persistentVolumeClaim": {"claimName": claim}} if claim else self.v["checkpoint"]["volume"]
        volumes = [self.volume("data", self.v["data"]["volume"]),
                   self.volume(policy.CHECKPOINTS_VOLUME, outputs),
                   {"name": "tmp", "emptyDir": {}}]
        if self.v["accelerator"] == "gpu":
            volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": self.v["shm_size"]}})
        return volumes

    def container_resources(self) -> dict:
        resources = copy.deepcopy(self.v["resources"])
        if self.v["accelerator"] == "gpu":
            resources.setdefault("limits", {})[policy.GPU_RESOURCE] = self.v["local_device_count"]
        return resources

    def runtime_labels(self) -> dict:
        """An own TrainingRuntime's labels: ours, and the framework's, without which the Kubeflow SDK's
        TrainerClient refuses the runtime, and with it every call that reads a TrainJob of it."""
        return {**self.labels("runtime"), "trainer.kubeflow.org/framework": "jax"}

    def node_resources(self) -> dict:
        """A TrainJob's resourcesPerNode: the container's, whose limits on a CPU job take requests.cpu as
        their cpu when they name none: the Kubeflow SDK's TrainerClient reads a node's device from its
        limits, and limits that name no device (memory alone) fail its list of the whole namespace."""
        resources = self.container_resources()
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        if self.v["accelerator"] != "gpu" and limits and "cpu" not in limits and "cpu" in requests:
            limits["cpu"] = requests["cpu"]
        return resources

    def tolerations(self) -> list[dict]:
        """The user's tolerations, the GPU resource's on GPU pods, and those of a lost node
        (policy.NODE_LOST_TAINTS for failure.node_lost_seconds), less those whose key a user toleration
        names with the NoExecute effect or none (which matches every effect)."""
        tolerations = list(self.v["tolerations"])
        if self.v["accelerator"] == "gpu":
            tolerations.append({"key": policy.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
        named = {t.get("key") for t in self.v["tolerations"] if t.get("effect") in (None, "", policy.NODE_LOST_EFFECT)}
        return tolerations + [{"key": key, "operator": "Exists", "effect": policy.NODE_LOST_EFFECT,
                               "tolerationSeconds": self.v["failure"]["node_lost_seconds"]}
                              for key in policy.NODE_LOST_TAINTS if key not in named]

    def volume(self, name: str, source: dict) -> dict:
        return {"name": name, **(source or {"emptyDir": {}})}

    @staticmethod
    def runtime_hook_annotations() -> dict:
        """A rendered TrainingRuntime is a Helm pre-install/pre-upgrade hook in both renderers, so
        that helm creates it before the TrainJob that names it (and kubectl ignores them)."""
        return {"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}

    def container_name(self) -> str:
        """The trainer's container: ours, or the one a TrainJob runtime runs it in."""
        return targets.workload(self.v).container

    def pod_failure_policy(self, child: bool = False) -> dict:
        """The podFailurePolicy of an Indexed Job, or with `child` of a Job a JobSet owns: the failure
        rules of policy.py, an exit-code action of trainer/exit_codes.py or a pod condition each."""
        rules = []
        for action, match in policy.CHILD_JOB_FAILURE_RULES if child else policy.POD_FAILURE_RULES:
            if match in ("fail", "ignore", "retry"):
                codes = {"containerName": self.container_name(), "operator": "In", "values": exit_codes.codes(match)}
                rules.append({"action": action, "onExitCodes": codes})
            else:
                rules.append({"action": action, "onPodConditions": [{"type": match, "status": "True"}]})
        return {"rules": rules}

    def container_restart_rules(self) -> list[dict]:
        """The container's in-place restarts (policy.IN_PLACE_RESTART) on a target that restarts in place
        (the Indexed Job); none elsewhere, or where the render's Kubernetes version (kube_version) lacks
        container restart rules."""
        if not targets.workload(self.v).restarts_in_place or not kubernetes_versions.at_least(
                self.v["kube_version"], kubernetes_versions.CONTAINER_RESTART_RULES):
            return []
        codes = exit_codes.codes(policy.IN_PLACE_RESTART)
        return [{"action": "Restart", "exitCodes": {"operator": "In", "values": codes}}]

    @staticmethod
    def jobset_failure_rules() -> list[dict]:
        """A JobSet's failurePolicy rules (policy.py)."""
        return copy.deepcopy(list(policy.JOBSET_FAILURE_RULES))

    def jobset_annotations(self) -> dict:
        annotations = dict(self.v["annotations"])
        if self.v["jobset"]["exclusive_topology"]:
            annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] = self.v["jobset"]["exclusive_topology"]
        return {**annotations, **self.job_annotations()}

    def job_annotations(self) -> dict:
        """The job object's own annotations: where its outputs are (outputs.py)."""
        return outputs_annotations(self.v)

    def outputs_claim(self) -> dict | None:
        """The PersistentVolumeClaim of the job's outputs, when the persistence setting renders one.
        Helm keeps it on uninstall (resource-policy keep): the results are the user's."""
        name = names.rendered_claim(self.v)
        if not name:
            return None
        p = self.v["persistence"]
        spec = {"accessModes": [p["access_mode"]], "resources": {"requests": {"storage": p["size"]}}}
        if p["storage_class"]:
            spec["storageClassName"] = "" if p["storage_class"] == "-" else p["storage_class"]
        annotations = {**self.v["annotations"], **p["annotations"], "helm.sh/resource-policy": "keep"}
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": self.v["namespace"], "labels": self.labels("outputs"),
                             "annotations": annotations},
                "spec": spec}

    def metrics_port(self) -> dict | None:
        """The trainer's metrics port (metrics.port; 0: none), named for a PodMonitor."""
        port = self.v["metrics"]["port"]
        return {"name": policy.METRICS_PORT_NAME, "containerPort": port, "protocol": "TCP"} if port else None

    def pod_annotations(self) -> dict:
        """The pods' annotations: annotation-based scrape discovery's (prometheus.io/*) when the metrics
        port is on, then the annotations variable, which wins over them (a platform's own scrape
        settings), then Kueue's topology request."""
        port = self.v["metrics"]["port"]
        scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                  "prometheus.io/path": contract.METRICS_PATH} if port else {}
        return {**scrape, **self.v["annotations"], **kueue.pod_annotations(self.v)}

    def pod_monitor(self) -> bool:
        """Whether to render a PodMonitor (metrics.pod_monitor, with the port on)."""
        return bool(self.v["metrics"]["pod_monitor"] and self.v["metrics"]["port"])

    def pod_monitor_endpoints(self) -> list[dict]:
        return [{"port": policy.METRICS_PORT_NAME, "path": contract.METRICS_PATH}]

    def jaxjob_backoff_limit(self) -> int:
        """A JAXJob's runPolicy.backoffLimit: backoff_limit for each host, at least policy.JAXJOB_BACKOFF_LIMIT_FLOOR."""
        return max(self.v["backoff_limit"] * self.v["hosts_count"], policy.JAXJOB_BACKOFF_LIMIT_FLOOR)

    def image(self) -> str:
        return images.reference(self.v)

    def pull_policy(self) -> str:
        return images.pull_policy(self.v)

    def globals(self) -> dict:
        return {name: getattr(self, name) for name in (
            "image", "pull_policy", "suspended",
            "selector_labels", "labels", "container_env", "container_resources", "node_resources",
            "runtime_labels",
            "tolerations", "volume", "jobset_annotations", "job_annotations", "pod_failure_policy", "container_restart_rules", "jobset_failure_rules", "container_name", "runtime_hook_annotations", "container_command", "container_args",
            "pod_security_context", "container_security_context", "pull_secrets", "volume_mounts",
            "volumes", "target", "outputs_claim", "metrics_port", "pod_annotations",
            "pod_monitor_endpoints", "coordinator_service", "jaxjob_backoff_limit")}


def render_text(values: dict) -> str:
    """The target's objects as a multi-document YAML stream."""
    pod = PodContext(values)
    shipped = Shipped(values, pod)
    context = {**pod.globals(), **shipped.globals()}
    text = _environment().get_template(targets.target(values).template).render(
        values=values, version=__version__, **context)
    if shipped.shipped():  # before the pods that mount it
        text = _environment().get_template(shipped_template).render(values=values, **context) + "\n---\n" + text
    if names.rendered_claim(values):
        text = _environment().get_template(CLAIM_TEMPLATE).render(**context) + text
    if PodContext(values).pod_monitor():
        text += "\n---\n" + _environment().get_template(POD_MONITOR_TEMPLATE).render(values=values, **context)
    if values["network_policy"]["enabled"]:
        text += "\n---\n" + _environment().get_template(NETWORK_POLICY_TEMPLATE).render(values=values, **context)
    return text


def render_documents(values: dict) -> list[dict]:
    """The parsed objects of a Kubernetes target; a template bug fails here, not in the cluster."""
    targets.workload(values)  # a ValueError for a target without Kubernetes objects
    text = render_text(values)
    try:
        docs = yaml_text.load_all(text)
    except yaml.YAMLError as exc:
        raise TemplateBug(f"template {values['target']} produced invalid YAML: {exc}\n{text}") from exc
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc:
            raise TemplateBug(f"template {values['target']} produced a document without kind: {doc!r}")
    return docs


def files(values: dict, fmt: str) -> dict[str, str]:
    """One file per object (`jaxgen render -o`), in YAML or JSON."""
    dump = (lambda doc: dump_yaml([doc])) if fmt == "yaml" else dump_json
    return {file_name(doc, fmt): dump(doc) for doc in render_documents(values)}


def stream(values: dict, fmt: str) -> str:
    """Every object in one text: a multi-document YAML stream, or a JSON v1 List."""
    docs = render_documents(values)
    return dump_yaml(docs) if fmt == "yaml" else dump_json_list(docs)
