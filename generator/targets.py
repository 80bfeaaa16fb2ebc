"""Every target jaxgen renders for, in one table: its engine, what it creates and how it is driven.

Everything that differs between targets is read from here: the dispatcher (generator/engines/, by
`engine`), the renderers (which template, which pod hostnames, whether JAX_* comes from us or from
the engine), the semantic checks (name lengths), `jaxgen run` (where the pod spec sits, what the
engine sets in each process) and the lifecycle scripts (prepare.sh writes a target's facts into the
build folder's release.env; run.sh and clean.sh read them) and the Helm chart (each Kubernetes
target's facts end its own Helm template, written from chart_row() by `make generate`), and the docs
(the chart README's target table, with what a cluster needs for each target: `make generate`). A row
holds what every target has; a Kubernetes target's job object and pods are its `workload`, and a
runtime that owns the pods instead of the job object is the workload's `runtime`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from trainer.cluster import INDEXED_JOB, JAX, KUBEFLOW_V1, SLURM, Launcher

from .kubernetes_versions import LOWEST

# The pod annotation and label an Indexed Job (and a JobSet's child Job) numbers its pods with.
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
CONTAINER = "jax"  # our container's name in the pods we render (where no runtime names its own)


@dataclass(frozen=True)
class Hosts:
    """How an engine names the pod of process i: <name>-<replica segments>-<i>. With a subdomain (the
    headless Service <name>) process 0 resolves as <its hostname>.<name>; without, the engine gives
    each pod a Service of its own, named as the pod. With a `service`, the other processes reach
    process 0 through a Service of ours instead (render: coordinator Service)."""

    replica: tuple[str, ...] = ()
    subdomain: bool = True
    # The coordinator Service our render adds (a format of name), where the engine's own name for
    # process 0 resolves only while its pod is Ready: a restarted gang's first lookup came before the
    # new process 0 was, and the cluster DNS cached the NXDOMAIN (5 s to 30 s). A ClusterIP name
    # always resolves. No longer than process 0's hostname, whose length check then covers it.
    service: str = ""
    # What a pod's name adds to its hostname, where the engine refuses names over 63 characters (the
    # JobSet webhook counts <hostname>-<5 random characters>; a Job's pods are truncated instead).
    pod_name_suffix: str = ""
    replicated_job: str = ""  # the JobSet's replicated Job that runs the pods ("" for other kinds)

    @classmethod
    def jobset(cls, job: str) -> Hosts:
        """The pods of a JobSet's replicated Job `job` (one replica: Job index 0)."""
        return cls(replica=(job, "0"), pod_name_suffix="-abcde", replicated_job=job)

    def host(self, name: str, index) -> str:
        return "-".join((name, *self.replica, str(index)))

    def coordinator(self, name: str) -> str:
        if self.service:
            return self.service.format(name=name)
        return self.host(name, 0) + (f".{name}" if self.subdomain else "")


@dataclass(frozen=True)
class Runtime:
    """A runtime that owns the pods in the job object's stead (Kubeflow Trainer's TrainingRuntime)."""

    job: str  # its replicated Job that runs the trainer
    container: str  # and that Job's container
    port: int  # the coordinator's port, which the runtime picks
    patch_manager: str  # owner of our patch of its pod template (the webhook wants a domain-prefixed path)
    resources: tuple = ()  # other kinds a render may create beside the job (clean.sh deletes them after it)


NO_RUNTIME = Runtime("", "", 0, "")  # what a reader of every row's runtime facts finds where the job owns the pods


@dataclass(frozen=True)
class Workload:
    """A Kubernetes target's job object and its pods."""

    kind: str
    resource: str  # kubectl's plural.group for the kind
    hosts: Hosts
    pod_selector: str  # label selector of its pods (format of name)
    succeeded: str  # the job's condition type that means it succeeded ("Failed" means failed)
    # Where the worker pod spec sits inside the object; () where the engine assembles it (`jaxgen run`
    # runs the targets that have one).
    pod_spec_path: tuple = ()
    index_label: str = COMPLETION_INDEX_KEY  # pod label holding the process id
    owner_label: str = ""  # pod label holding the job's uid, where the pods are not owned by it directly
    port_name: str = "coordinator"  # the container port's name (a JAXJob's operator reads jaxjob-port)
    restart_budget: tuple = ("backoff_limit",)  # values path of the number of restarts allowed
    # Variables the engine sets in every pod beyond its launcher's (we leave them out of the render).
    engine_env: dict = field(default_factory=dict)
    runtime: Runtime | None = None
    # A stock Kueue does not manage the kind: its integration is disabled by default
    # (generator/engines/kubernetes/kueue.py).
    kueue_opt_in: bool = False
    # Where the job's `suspend` sits, which a queued job is created with for Kueue to admit; () where
    # Kueue holds the pods back with a scheduling gate instead.
    suspend_path: tuple = ("spec", "suspend")
    # The pod field holding the gang's attempt (trainer/fencing.py), where the controller gives one.
    attempt_field: str = ""
    # Whether its container restarts in place, in the pod it had (container restart rules, where the
    # render's Kubernetes has them), on the codes of policy.IN_PLACE_RESTART: the job object has no
    # owner to restart its gang as a whole.
    restarts_in_place: bool = False
    # Whether its controller counts restarts against restart_budget. The training-operator (v1.9)
    # counts none for a JAXJob (policy.JAXJOB_BACKOFF_LIMIT_FLOOR): a process that ends with 128 or
    # more (an OOM kill, a hang) restarts without end, and only active_deadline_seconds bounds the job.
    counts_restarts: bool = True

    @property
    def container(self) -> str:
        """The container that runs the trainer: ours, or the one the runtime runs it in."""
        return self.runtime.container if self.runtime else CONTAINER

    @property
    def engine_port(self) -> int:
        """The coordinator's port where the engine picks it; 0: the coordinator_port variable."""
        return self.runtime.port if self.runtime else 0

    @property
    def owns_pods(self) -> bool:
        """Whether the pods' owner reference is the job (else only owner_label, if any)."""
        return self.runtime is None

    def process_labels(self, name: str, index) -> dict[str, str]:
        """The labels that select the pod of process `index` (process 0's: what a coordinator Service selects)."""
        pods = dict(term.split("=", 1) for term in self.pod_selector.format(name=name).split(","))
        return {**pods, self.index_label: str(index)}

    def rank0_selector(self, name: str) -> str:
        """The label selector of process 0's pod (what `kubectl logs` follows)."""
        return ",".join(f"{key}={value}" for key, value in self.process_labels(name, 0).items())


@dataclass(frozen=True)
class Needs:
    """What a cluster needs installed for a target: the chart README's target table shows it, with the
    commands that install it (the docs link there instead of listing targets)."""

    what: str  # the upstream component (Markdown, linked to its project)
    version: str = ""  # the variable of scripts/cluster/versions.sh that pins the version tested here
    install: tuple[str, ...] = ()  # its install commands, after `source scripts/cluster/versions.sh`
    guide: str = ""  # a page of its own under docs/ that covers the set-up instead


@dataclass(frozen=True)
class Target:
    name: str
    engine: str  # the renderer family: a package under generator/engines/
    template: str  # file under that package's templates/
    # The variables each process reads its place in the job from (trainer/cluster.py), and the
    # launchers whose variables the engine sets itself; we render `launcher` where it does not.
    launcher: Launcher
    engine_sets: tuple[Launcher, ...] = ()
    workload: Workload | None = None
    needs: Needs = Needs("nothing")

    @property
    def kubernetes(self) -> bool:
        return self.workload is not None

    @property
    def process_env(self) -> bool:
        """Whether the pods get our JAX_* variables (not where the engine sets the launcher's own)."""
        return self.launcher not in self.engine_sets

    @property
    def own_program_init(self) -> str:
        return own_program_init(self.launcher)

    def facts(self, name: str) -> dict:
        """What the lifecycle scripts need (prepare.sh writes them to the build folder's release.env):
        how run.sh and clean.sh find the job and its pods, and every kind clean.sh deletes (a
        release's name may have run another target before); each one empty where there is none."""
        w = self.workload
        if w is None:
            return dict.fromkeys(SCRIPT_FACTS, "")
        return dict(zip(SCRIPT_FACTS, (w.resource, w.pod_selector.format(name=name), w.index_label, w.owner_label,
                                       str(w.owns_pods).lower(), w.succeeded, w.container,
                                       " ".join(cleanup_resources()))))


SCRIPT_FACTS = ("KIND", "POD_SELECTOR", "INDEX_LABEL", "OWNER_LABEL", "OWNS_PODS", "SUCCEEDED", "CONTAINER",
                "CLEANUP_RESOURCES")


def own_program_init(launcher: Launcher) -> str:
    """How a program of the user's own brings up distributed JAX from the launcher's variables, where
    jax.distributed.initialize() alone cannot: it reads JAX_COORDINATOR_ADDRESS only, and its
    Kubernetes detection needs API access the pods are not given ("" = it works alone: srun)."""
    if not launcher.coordinator:
        return ""

    def read(variable: str) -> str:
        return f'os.environ["{variable}"]'

    count, rank = f"int({read(launcher.num_processes)})", f"int({read(launcher.process_id)})"
    if launcher == JAX:
        return f"jax.distributed.initialize(num_processes={count}, process_id={rank})"
    address = f"f'{{{read(launcher.coordinator)}}}:{{{read(launcher.coordinator_port)}}}'"
    return f"jax.distributed.initialize({address}, {count}, {rank})"


_TRAINER_RUNTIME = Runtime(job="node", container="node", port=29500, patch_manager="jax-training.dev/pod-template",
                           resources=("trainingruntimes.trainer.kubeflow.org",))
_JOBSET_POD_SPEC = ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec")
# A JobSet numbers its restarts on every pod it makes (ours, and a TrainJob runtime's).
_JOBSET_ATTEMPT = "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']"

# A target that runs on another's objects (a TrainJob on a JobSet, a JobSet on Jobs) comes after it:
# clean.sh deletes the kinds in reverse order, owners first.
TARGETS = {t.name: t for t in (
    # Our JAX_* variables; Kubernetes sets the completion index.
    Target("indexed-job", "kubernetes", "indexed-job.yaml.j2", JAX, (INDEXED_JOB,), Workload(
        "Job", "jobs.batch", Hosts(), "batch.kubernetes.io/job-name={name}", "Complete",
        pod_spec_path=("spec", "template", "spec"), restarts_in_place=True),
        Needs(f"nothing: Kubernetes' own Job and Service (Kubernetes {LOWEST.rsplit('.', 1)[0]} or newer)",
              "K8S_VERSION")),
    # The Kubeflow training-operator (v1) sets its own variables and PYTHONUNBUFFERED, and gives each
    # pod a Service named as the pod, which publishes Ready pods only; the trainer reaches process 0
    # through our coordinator Service instead (JAX_COORDINATOR_ADDRESS, read before the operator's).
    Target("jaxjob", "kubernetes", "jaxjob.yaml.j2", KUBEFLOW_V1, (KUBEFLOW_V1,), Workload(
        "JAXJob", "jaxjobs.kubeflow.org", Hosts(replica=("worker",), subdomain=False, service="{name}-coord"),
        "training.kubeflow.org/job-name={name}", "Succeeded",
        pod_spec_path=("spec", "jaxReplicaSpecs", "Worker", "template", "spec"),
        index_label="training.kubeflow.org/replica-index", port_name="jaxjob-port",
        engine_env={"PYTHONUNBUFFERED": "1"}, kueue_opt_in=True, suspend_path=("spec", "runPolicy", "suspend"),
        counts_restarts=False),
        Needs("[Kubeflow training-operator](https://github.com/kubeflow/training-operator) v1 (standalone)",
              "TRAINING_OPERATOR_VERSION", ('kubectl apply --server-side -k "github.com/kubeflow/training-operator.git'
                                            '/manifests/overlays/standalone?ref=${TRAINING_OPERATOR_VERSION}"',))),
    Target("jobset", "kubernetes", "jobset.yaml.j2", JAX, (INDEXED_JOB,), Workload(
        "JobSet", "jobsets.jobset.x-k8s.io", Hosts.jobset("worker"), "jobset.sigs.k8s.io/jobset-name={name}",
        "Completed", pod_spec_path=_JOBSET_POD_SPEC, owner_label="jobset.sigs.k8s.io/jobset-uid",
        restart_budget=("jobset", "max_restarts"), attempt_field=_JOBSET_ATTEMPT),
        Needs("[JobSet](https://github.com/kubernetes-sigs/jobset) controller", "JOBSET_VERSION",
              ('kubectl apply --server-side -f "https://github.com/kubernetes-sigs/jobset/releases/download/'
               '${JOBSET_VERSION}/manifests.yaml"',))),
    # Kubeflow Trainer v2: the TrainJob's runtime (jax-distributed) makes a JobSet with one replicated
    # Job "node" and its JAX plugin sets JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID.
    Target("trainjob", "kubernetes", "trainjob.yaml.j2", JAX, (JAX,), Workload(
        "TrainJob", "trainjobs.trainer.kubeflow.org", Hosts.jobset(_TRAINER_RUNTIME.job),
        "jobset.sigs.k8s.io/jobset-name={name}", "Complete", runtime=_TRAINER_RUNTIME,
        attempt_field=_JOBSET_ATTEMPT),
        # The controller manager brings JobSet along; the runtimes overlay holds jax-distributed (a
        # release with trainjob.own_runtime: true brings its own and needs only the controller).
        Needs("[Kubeflow Trainer](https://github.com/kubeflow/trainer) v2 with its `jax-distributed` runtime",
              "TRAINER_VERSION", (
                  'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager'
                  '?ref=${TRAINER_VERSION}"',
                  'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes'
                  '?ref=${TRAINER_VERSION}"'))),
    Target("slurm", "slurm", "slurm.sbatch.j2", SLURM, (SLURM,), needs=Needs("a SLURM cluster", guide="docs/slurm.md")),
)}

NAMES = tuple(TARGETS)
KUBERNETES = tuple(name for name, t in TARGETS.items() if t.kubernetes)
LOCAL = tuple(name for name in KUBERNETES if TARGETS[name].workload.pod_spec_path)
ENGINES = tuple(dict.fromkeys(t.engine for t in TARGETS.values()))  # the renderer families


def target(values_or_name) -> Target:
    name = values_or_name if isinstance(values_or_name, str) else values_or_name["target"]
    return TARGETS[name]


def workload(values_or_name) -> Workload:
    """The Kubernetes facts of a target (a ValueError for one that has none)."""
    t = target(values_or_name)
    if t.workload is None:
        raise ValueError(f"target {t.name!r} creates no Kubernetes objects")
    return t.workload


# Kinds a render may create beside any target's job object (metrics.pod_monitor's PodMonitor).
OPTIONAL_RESOURCES = ("podmonitors.monitoring.coreos.com",)


def cleanup_resources() -> list[str]:
    """What clean.sh deletes, owners first so their controllers do not recreate what it deletes: the
    table in reverse, as a target that runs on another's objects (a TrainJob's JobSet, a JobSet's
    Jobs) comes after it in the table."""
    owners = [t.workload for t in reversed(TARGETS.values()) if t.workload]
    return ([r for w in owners for r in (w.resource, *(w.runtime.resources if w.runtime else ()))]
            + list(OPTIONAL_RESOURCES) + ["services", "networkpolicies.networking.k8s.io", "configmaps", "pods"])


GO_NAME, GO_INDEX = "%[1]s", "%[2]d"  # name and index as Go's printf takes them from the chart
# The line of a Kubernetes target's Helm template below which `make generate` writes the target's row.
CHART_FACTS_MARKER = "{{/* The target's row (generator/targets.py), for _targets.tpl: written by make generate. */}}"


def chart_row(name: str) -> dict:
    """The facts the chart's templates read for a Kubernetes target (hostname and coordinator as
    printf formats of name and index; rank0: what `kubectl logs` follows for process 0; container:
    the container that runs the trainer)."""
    t = TARGETS[name]
    w = t.workload
    row = {"hostname": w.hosts.host(GO_NAME, GO_INDEX), "coordinator": w.hosts.coordinator(GO_NAME),
           "portName": w.port_name, "processEnv": _launcher_names(t.launcher) if t.process_env else False,
           "unbuffered": "PYTHONUNBUFFERED" not in w.engine_env,
           "resource": w.resource, "rank0": f"-l '{w.rank0_selector(GO_NAME)}'",
           "ownProgramInit": t.own_program_init}
    runtime = w.runtime or NO_RUNTIME
    optional = {"podNameSuffix": w.hosts.pod_name_suffix, "replicatedJob": w.hosts.replicated_job,
                "enginePort": w.engine_port, "runtimeJob": runtime.job,
                "runtimeContainer": runtime.container, "patchManager": runtime.patch_manager,
                "kueueOptIn": w.kueue_opt_in, "attemptField": w.attempt_field, "restartsInPlace": w.restarts_in_place,
                "restartsUncounted": not w.counts_restarts,
                # the coordinator Service (named as `coordinator`; it selects process 0's pod, its
                # labels as printf formats of name and index) and the variable that points at it
                "coordinatorEnv": JAX.coordinator if w.hosts.service else "",
                "coordinatorSelector": w.process_labels(GO_NAME, GO_INDEX) if w.hosts.service else {}}
    return {**row, **{k: v for k, v in optional.items() if v}, "container": w.container}


def chart_template(name: str, text: str) -> str:
    """A Kubernetes target's Helm template with its row at the end (replacing the one below the
    marker), as the template jax-training.facts.<name> that _targets.tpl includes for the release's
    target. A define renders nothing where it stands, and the trims leave the manifest as it was."""
    row = json.dumps(chart_row(name), indent=1)
    if "{{" in row:
        raise ValueError(f"target {name}: its chart facts must not hold '{{{{' (Go template syntax)")
    head = text.split(CHART_FACTS_MARKER)[0].rstrip("\n")
    return f'{head}\n{CHART_FACTS_MARKER}\n{{{{- define "jax-training.facts.{name}" }}}}{row}{{{{ end -}}}}\n'


def chart_template_path(name: str) -> str:
    """Where a Kubernetes target's Helm template sits, relative to the chart (its twin is the Jinja template)."""
    return "templates/" + TARGETS[name].template.removesuffix(".j2")


def _launcher_names(launcher: Launcher) -> dict:
    """The variables the chart renders for the launcher (coordinator as HOST:PORT)."""
    return {"coordinator": launcher.coordinator, "numProcesses": launcher.num_processes,
            "processId": launcher.process_id}


def restart_budget(values: dict) -> int:
    node = values
    for key in workload(values).restart_budget:
        node = node[key]
    return node

