"""`jaxgen check FILE` on Kubernetes: ask the cluster, before anything is applied, for every piece
this render needs, and name what to install or set, one line each. Nothing is created: the only
writes are server-side dry runs, which admission (webhooks, PodSecurity) answers and which persist
nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from ... import kubernetes_versions, names, targets
from . import kueue
from .kubectl import Forbidden, Kubectl, NotFound, forbidden
from .policy import BUCKET_CREDENTIALS_ENV, GPU_RESOURCE as GPU
from .render import PodContext, render_documents

DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


@dataclass(frozen=True)
class Component:
    """An upstream component a target needs, the version the tests run, and its install command."""

    name: str
    version: str  # scripts/cluster/controlplane/go.mod pins the one the tests run (a test compares them)
    install: str
    kueue_framework: str  # its name in Kueue's integrations.frameworks


COMPONENTS = {
    "batch": Component("the Job controller", "", "", "batch/job"),
    "jobset.x-k8s.io": Component(
        "JobSet", "v0.12.0",
        "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/"
        "manifests.yaml", "jobset.x-k8s.io/jobset"),
    "kubeflow.org": Component(
        "the Kubeflow training-operator (JAXJob)", "v1.9.4",
        'kubectl apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/'
        'standalone?ref=v1.9.4"', "kubeflow.org/jaxjob"),
    "trainer.kubeflow.org": Component(
        "Kubeflow Trainer", "v2.3.0",
        'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/'
        'manager?ref=v2.3.0"', "trainer.kubeflow.org/trainjob"),
}
KUEUE = Component("Kueue", "v0.19.2", "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
                  "releases/download/v0.19.2/manifests.yaml", "")
TRAINER_RUNTIMES = ('kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/'
                    'runtimes?ref=v2.3.0"')
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
# Kueue's webhook configurations (upstream names) also cover the job kinds it queues: not their controllers'.
KUEUE_WEBHOOKS = "kueue-"


def version_gap(values: dict, server: str, docs: list[dict]) -> list[str]:
    """A line when the render is for a newer Kubernetes than the cluster's and differs from a render
    for the cluster's (fields its API server would refuse or drop)."""
    rendered_for = values["kube_version"] or kubernetes_versions.NEWEST
    try:
        running = kubernetes_versions.parse(server)
    except ValueError as error:
        return [f"this cluster's version cannot be compared with the render's ({rendered_for}): {error}"]
    if running >= kubernetes_versions.parse(rendered_for):
        return []
    if render_documents({**values, "kube_version": server}) == docs:
        return []
    return [f"this cluster runs Kubernetes {server}; the render is for {rendered_for}"
            f"{'' if values['kube_version'] else ' (kube_version is empty: the newest)'}, with fields this API "
            f"server refuses or drops: render for it with --set kube_version={server.lstrip('v')}"]


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] or "core"


def _component_line(component: Component, problem: str) -> str:
    return f"{problem}: install {component.name} {component.version}: {component.install}"


class Preflight:
    """Each check returns its failures (one line each); run() all of them, in dependency order."""

    def __init__(self, values: dict, kube: Kubectl):
        self.v, self.kube = values, kube
        self.docs = render_documents(values)
        self.workload = targets.workload(values)
        self.job = next(d for d in self.docs if d["kind"] == self.workload.kind)
        self.group = _group(self.job["apiVersion"])
        self.component = COMPONENTS[self.group]

    def run(self) -> tuple[list[str], list[str], list[str]]:
        """(passed, failed, warned): a line per check, a line per warning. A check whose reads RBAC
        refuses is not passed: a warning names the rule it needs."""
        self.notes: list[str] = []
        served, namespace = self.kube.many([self.kube_api_versions, self.namespace_exists])
        checks = [("API", lambda: self.api(served))]
        if not any(self._unserved(served)):
            checks += [("controller", self.controller), ("runtime", self.runtime)]
            if namespace:
                checks.append(("admission", self.admission))
        checks.append(("namespace", lambda: [] if namespace else [
            f"namespace {self.kube.namespace} does not exist: kubectl create namespace {self.kube.namespace}"]))
        checks += [("queue", lambda: self.queue(served)), ("storage", self.storage),
                   ("bucket credentials", self.bucket_secret), ("GPUs", self.gpus),
                   ("Kubernetes version", self.kubernetes_version)]
        results = self.kube.many([self._guarded(what, check) for what, check in checks])
        passed = [what for (what, _), failures in zip(checks, results) if failures == []]
        failed = [line for failures in results if failures for line in failures]
        return passed, failed, (self._guarded("the shared claim", self.shared_claim)() or []) + self.notes

    def _guarded(self, what: str, check):
        """The check, where a read RBAC refuses becomes a note (None: not checked) instead of an error."""
        def guarded():
            try:
                return check()
            except Forbidden as refused:
                self.notes.append(f"{what} not checked: {refused}")
                return None
        return guarded

    # --- what the cluster serves

    def kubernetes_version(self) -> list[str]:
        server = self.kube.run("version", "-o", "json", namespaced=False).stdout
        return version_gap(self.v, json.loads(server)["serverVersion"]["gitVersion"], self.docs)


    def kube_api_versions(self) -> set[str]:
        return set(self.kube.run("api-versions", namespaced=False).stdout.split())

    def namespace_exists(self) -> bool:
        """Whether the namespace exists; True where RBAC may not read namespaces (a namespace's Role):
        the dry runs in it answer instead."""
        try:
            self.kube.get("namespace", self.kube.namespace, namespaced=False)
            return True
        except NotFound:
            return False
        except Forbidden:
            return True

    def _unserved(self, served: set[str]) -> list[dict]:
        return [d for d in self.docs if d["apiVersion"] != "v1" and d["apiVersion"] not in served]

    def api(self, served: set[str]) -> list[str]:
        lines = []
        for doc in self._unserved(served):
            component = COMPONENTS.get(_group(doc["apiVersion"]))
            problem = f"{doc['kind']} ({doc['apiVersion']}) is not served by this cluster"
            if component and component.install:
                lines.append(_component_line(component, problem))
            elif doc["kind"] == "PodMonitor":
                lines.append(f"{problem}: install the Prometheus Operator's CRDs, or set metrics.pod_monitor=false")
            else:
                lines.append(problem)
        return list(dict.fromkeys(lines))

    def runtime(self) -> list[str]:
        ref = (self.job.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("kind") != "ClusterTrainingRuntime":
            return []
        try:
            self.kube.get("clustertrainingruntimes.trainer.kubeflow.org", ref["name"], namespaced=False)
            return []
        except NotFound:
            return [f"ClusterTrainingRuntime {ref['name']} does not exist: install Kubeflow Trainer's runtimes: "
                    f"{TRAINER_RUNTIMES}"]

    def controller(self) -> list[str]:
        """Upstream installs a webhook with each controller: none for the job's kind means no controller;
        one that does not answer the dry run means a controller that is not running."""
        if not self.component.install:
            return []
        resource = self.workload.resource.split(".", 1)[0]
        hooks = self.kube.get("validatingwebhookconfigurations,mutatingwebhookconfigurations", namespaced=False)
        covered = any(self.group in rule.get("apiGroups", []) and resource in rule.get("resources", [])
                      for config in hooks["items"] if not config["metadata"]["name"].startswith(KUEUE_WEBHOOKS)
                      for hook in config.get("webhooks") or [] for rule in hook.get("rules") or [])
        if not covered:
            return [_component_line(self.component, f"no {self.workload.kind} controller: no webhook answers for "
                                                   f"{self.workload.resource}")]
        failed = self.job_dry_run
        if failed and "webhook" in failed and "denied the request" not in failed:  # a denial is an answer
            return [_component_line(self.component, f"the {self.workload.kind} controller does not answer "
                                                   f"({failed})")]
        return []

    def admission(self) -> list[str]:
        """Every object of the render and the job's pods, created server-side as a dry run: RBAC and
        admission (PodSecurity, webhooks, quotas, limit ranges) answer as they would for the real ones.
        An object RBAC refuses is named with the Role rule that allows it; the pods' RBAC refusal is a
        note (the controller creates them, not the user)."""
        failed = self.job_dry_run
        refused = failed and ("webhook" not in failed or "denied the request" in failed)  # not a silent webhook
        lines = [self.refusal(self.job, failed)] if refused and not self._awaits_own_runtime(failed) else []
        admission_refused = bool(lines) and not forbidden(failed)  # its pods' refusal would repeat it
        others = [doc for doc in self.docs if doc is not self.job]
        answers = self.kube.many([lambda doc=doc: self._dry_run([doc]) for doc in others])
        lines += [self.refusal(doc, failed) for doc, failed in zip(others, answers) if failed]
        if admission_refused:
            return lines
        pod = self._pod()
        failed = pod and self._dry_run([pod])
        if failed and (rbac := forbidden(failed)):  # the controller creates the pods, not the user
            self.notes.append(f"the pods' admission (PodSecurity, webhooks) not checked: the {self.workload.kind} "
                              f"controller creates them, and {rbac}")
        elif failed:
            lines.append(f"the pods of {self.v['name']} are refused by the cluster: {failed}")
        return lines

    def refusal(self, doc: dict, failed: str) -> str:
        """A dry run's refusal as one line: RBAC's names the rule that would allow the object."""
        what = f"{doc['kind']} {doc['metadata']['name']}"
        if rbac := forbidden(failed):
            return (f'namespace {self.kube.namespace} may not create {what} (RBAC, user "{rbac.user}"): '
                    f"{rbac.rule_line()}")
        return f"{what} is refused by the cluster: {failed}"

    def _awaits_own_runtime(self, failed: str) -> bool:
        """The TrainJob webhook refuses a job whose runtime does not exist yet; a TrainingRuntime of
        the render's own is applied before the job (run.sh), so that refusal is no gap. Kubeflow
        Trainer's webhook and Kueue's each word it their own way; whichever answers first is seen."""
        runtimes = [d["metadata"]["name"] for d in self.docs if d["kind"] == "TrainingRuntime"]
        return any("must be created before" in failed or f"runtime '{name}' not found" in failed for name in runtimes)

    def _pod(self) -> dict | None:
        node = self.job
        for key in self.workload.pod_spec_path:
            node = node[key]
        if node is self.job:
            return None  # the runtime assembles the pods (TrainJob)
        template = self._template_metadata()
        return {"apiVersion": "v1", "kind": "Pod", "spec": node,
                "metadata": {"generateName": f"{self.v['name']}-preflight-", "namespace": self.kube.namespace,
                             "labels": template.get("labels", {}), "annotations": template.get("annotations", {})}}

    def _template_metadata(self) -> dict:
        path = self.workload.pod_spec_path
        node = self.job
        for key in path[:-1]:
            node = node[key]
        return node.get("metadata", {})

    @cached_property
    def job_dry_run(self) -> str:
        """The job object's server-side dry run, which the controller and admission checks both read."""
        return self._dry_run([self.job])

    def _dry_run(self, docs: list[dict]) -> str:
        """"" when the cluster admits them, else its last error line."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        proc = self.kube.run("create", "--dry-run=server", "-f", "-", "-o", "name", check=False, stdin=body)
        if proc.returncode == 0:
            return ""
        lines = [line.strip() for line in proc.stderr.strip().splitlines() if line.strip()]
        if lines and "(AlreadyExists)" in lines[-1]:
            return ""  # this release's job is there already (run.sh follows or replaces it)
        return (lines[-1] if lines else f"kubectl exit {proc.returncode}").removeprefix("Error from server ")

    # --- what the render asks for

    def queue(self, served: set[str]) -> list[str]:
        queue = self.v["queue_name"]
        if not queue or kueue.unmanaged(self.v):
            return []
        if not any(v.startswith("kueue.x-k8s.io/") for v in served):
            return [_component_line(KUEUE, f"queue_name {queue}: Kueue is not installed")]
        lines = []
        try:
            self.kube.get("localqueues.kueue.x-k8s.io", queue)
        except NotFound:
            lines.append(f"queue_name: LocalQueue {queue} does not exist in namespace {self.kube.namespace}: "
                         "create it (kind LocalQueue, spec.clusterQueue) or set queue_name to one that exists "
                         "(kubectl get localqueues)")
        frameworks = self._kueue_frameworks()
        framework = self.component.kueue_framework
        if frameworks is not None and framework not in frameworks:
            lines.append(f"queue_name: Kueue's integration {framework} is not enabled: add it to "
                         f"integrations.frameworks in ConfigMap {KUEUE_CONFIG[0]}/{KUEUE_CONFIG[1]} and restart Kueue")
        return lines

    def _kueue_frameworks(self) -> list[str] | None:
        """integrations.frameworks of an upstream Kueue install's configuration; None where unreadable."""
        import yaml

        namespace, name, key = KUEUE_CONFIG
        try:
            config = self.kube.run("get", "configmap", name, f"--namespace={namespace}", "-o", "json",
                                   namespaced=False, check=False)
            text = json.loads(config.stdout)["data"][key] if config.returncode == 0 else None
            return (yaml.safe_load(text).get("integrations") or {}).get("frameworks") if text else None
        except (ValueError, KeyError, AttributeError, yaml.YAMLError):
            return None

    def storage(self) -> list[str]:
        p = self.v["persistence"]
        claim_name = names.outputs_claim(self.v)
        if not claim_name:
            return []
        lines = []
        if p["existing_claim"]:
            if self.claim_modes is None:
                return [f"persistence.existing_claim: PersistentVolumeClaim {p['existing_claim']} does not exist in "
                        f"namespace {self.kube.namespace}: create it, or leave existing_claim empty to render one"]
        elif not p["storage_class"]:
            classes = self.kube.get("storageclasses", namespaced=False)["items"]
            if not any((c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true" for c in classes):
                lines.append("persistence: the cluster has no default StorageClass for the claim "
                             f"{claim_name}: set persistence.storage_class to one of "
                             f"[{', '.join(c['metadata']['name'] for c in classes) or 'none'}], or mark one "
                             f"default (annotation {DEFAULT_CLASS}=true)")
        return lines

    @cached_property
    def claim_modes(self) -> list[str] | None:
        """The outputs claim's access modes: the existing claim's (None where it does not exist), else
        persistence.access_mode."""
        p = self.v["persistence"]
        if not p["existing_claim"]:
            return [p["access_mode"]]
        try:
            claim = self.kube.get("persistentvolumeclaim", p["existing_claim"])
        except NotFound:
            return None
        return (claim.get("spec") or {}).get("accessModes") or [p["access_mode"]]

    def shared_claim(self) -> list[str]:
        """A warning: a claim one node at a time may mount (ReadWriteOnce), several pods, and more than
        one node they may land on, with no pod affinity of the render's that keeps them together."""
        claim_name = names.outputs_claim(self.v)
        if not claim_name or self.v["hosts_count"] < 2 or _pins_pods(self.v["affinity"]):
            return []
        modes = self.claim_modes
        if modes is None or "ReadWriteMany" in modes:  # a missing claim: storage() says so
            return []
        nodes = self._schedulable_nodes()
        if len(nodes) < 2:
            return []
        return [f"persistence: claim {claim_name} is {'/'.join(modes)} and the {self.v['hosts_count']} pods that mount "
                f"it may land on {len(nodes)} nodes ({', '.join(nodes[:3])}{', …' if len(nodes) > 3 else ''}): pods "
                "on a second node stop in a Multi-Attach error; put the outputs in a bucket (outputs.uri, and no "
                "claim), use a ReadWriteMany class (persistence.access_mode=ReadWriteMany, "
                "persistence.storage_class), or pin the pods to one node (affinity)"]

    def bucket_secret(self) -> list[str]:
        """outputs.secret names a Secret of the namespace that holds both credentials' keys."""
        secret = self.v["outputs"]["secret"]
        if not secret:
            return []
        try:
            data = self.kube.get("secret", secret).get("data") or {}
        except NotFound:
            return [f"outputs.secret: Secret {secret} does not exist in namespace {self.kube.namespace}: kubectl create "
                    f"secret generic {secret} "
                    + " ".join(f"--from-literal={key}=…" for key in BUCKET_CREDENTIALS_ENV)]
        absent = [key for key in BUCKET_CREDENTIALS_ENV if key not in data]
        return [f"outputs.secret: Secret {secret} has no key {' or '.join(absent)}: the pods read the bucket's "
                f"credentials from {' and '.join(BUCKET_CREDENTIALS_ENV)}"] if absent else []

    def _schedulable_nodes(self) -> list[str]:
        """The nodes the pods may land on: not cordoned, with the render's node_selector's labels,
        admitted by its required node affinity, and every taint that keeps pods off (NoSchedule,
        NoExecute) tolerated by the pods."""
        tolerations = PodContext(self.v).tolerations()
        selector = self.v["node_selector"]
        nodes = self.kube.get("nodes", namespaced=False)["items"]
        return [n["metadata"]["name"] for n in nodes
                if not (n.get("spec") or {}).get("unschedulable")
                and all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
                and _admits(n, self.v["affinity"])
                and all(_tolerated(taint, tolerations) for taint in (n.get("spec") or {}).get("taints") or []
                        if taint.get("effect") in ("NoSchedule", "NoExecute"))]

    def gpus(self) -> list[str]:
        if self.v["accelerator"] != "gpu":
            return []
        nodes = self.kube.get("nodes", namespaced=False)["items"]
        if any(str((n.get("status") or {}).get("allocatable", {}).get(GPU, "0")) not in ("0", "") for n in nodes):
            return []
        return [f"accelerator gpu: no node offers {GPU}: install the NVIDIA device plugin (or GPU Operator) "
                "on the GPU nodes, or set accelerator=cpu"]


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    """Whether a toleration matches the taint (Kubernetes' rule: an empty key with Exists matches every
    taint, an empty effect every effect, Equal, the default operator, compares the values)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if not t.get("key") and t.get("operator") == "Exists":
            return True
        if t.get("key") == taint.get("key") and (
                t.get("operator") == "Exists" or (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def _pins_pods(affinity: dict) -> bool:
    """Whether a required pod affinity keeps the pods together: the user chose where they go."""
    return bool((affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))


def _admits(node: dict, affinity: dict) -> bool:
    """Whether the required node affinity lets pods on this node (Kubernetes' rule: any term, every
    expression of it; matchFields on metadata.name)."""
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}

    def matches(expression: dict, found: dict) -> bool:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In":
            return key in found and found[key] in values
        if operator == "NotIn":
            return found.get(key) not in values
        if operator == "Exists":
            return key in found
        if operator == "DoesNotExist":
            return key not in found
        try:  # Gt, Lt: integers
            number, bound = int(found[key]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return number > bound if operator == "Gt" else number < bound

    return any((term.get("matchExpressions") or term.get("matchFields"))
               and all(matches(e, labels) for e in term.get("matchExpressions") or [])
               and all(matches(e, fields) for e in term.get("matchFields") or [])
               for term in required.get("nodeSelectorTerms") or [])


def check(values: dict, kube: Kubectl) -> tuple[list[str], list[str], list[str]]:
    return Preflight(values, kube).run()


def offline_warnings(values: dict) -> list[str]:
    """What the render alone says may go wrong, where no cluster can say whether it does (the nodes):
    several pods mounting a ReadWriteOnce claim that the render makes."""
    claim_name = names.outputs_claim(values)
    p = values["persistence"]
    if (not claim_name or p["existing_claim"] or p["access_mode"] != "ReadWriteOnce" or values["hosts_count"] < 2
            or _pins_pods(values["affinity"])):
        return []
    return [f"persistence: claim {claim_name} is ReadWriteOnce and the {values['hosts_count']} pods that mount it "
            "must all run on one node (pods on a second node stop in a Multi-Attach error); with a cluster, "
            "jaxgen check says whether they may land on several"]
