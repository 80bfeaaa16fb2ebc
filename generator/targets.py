"""Every engine jaxgen renders for, in one table: what it creates and how it is driven.

Everything that differs between targets is read from here: the renderers (which template, which
pod hostnames, whether JAX_* comes from us or from the engine), the semantic checks (name lengths),
`jaxgen run` (where the pod spec sits) and the lifecycle scripts (prepare.sh writes a target's facts
into the build folder and scripts/lib/targets.sh; run.sh and clean.sh read them) and the Helm chart
(charts/jax-training/files/targets.json, written from chart_rows() by `make generate`). Adding a
target is one entry here, one template per renderer and its name in the schema's `target` enum.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer import contract

CONTAINER = "jax"  # our container's name in every pod we render


@dataclass(frozen=True)
class Target:
    name: str
    template: str  # file under generator/templates/
    kind: str = ""  # kind of the object that is the job ("" for slurm)
    resource: str = ""  # kubectl's plural.group for it
    # Where the worker pod spec sits inside that object; () where the engine assembles it (`jaxgen run`
    # runs the targets that have one).
    pod_spec_path: tuple = ()
    hostname: str = ""  # pod hostname of process i: format of name and index (DNS-1123 label)
    # What a pod's name adds to its hostname, where the engine refuses names over 63 characters (the
    # JobSet webhook counts <hostname>-<5 random characters>; a Job's pods are truncated instead).
    pod_name_suffix: str = ""
    coordinator: str = ""  # DNS name of process 0, as the other pods resolve it (format of name)
    # Whether the pods get our JAX_* variables; False where the engine injects its own.
    process_env: bool = True
    unbuffered: bool = True  # whether we set PYTHONUNBUFFERED (the training-operator does in JAXJob pods)
    # The coordinator's port where the engine picks it (a TrainJob's JAX plugin: 29500); 0 = the
    # coordinator_port variable.
    engine_port: int = 0
    port_name: str = "coordinator"  # the container port's name (a JAXJob's operator reads jaxjob-port)
    restart_budget: tuple = ("backoff_limit",)  # values path of the number of restarts allowed
    pod_selector: str = ""  # label selector of its pods (format of name)
    index_label: str = contract.COMPLETION_INDEX_KEY  # pod label holding the process id
    owner_label: str = ""  # pod label holding the job's uid, where the pods are not owned by it directly
    owns_pods: bool = True  # whether the pods' owner reference is the job (else only the label, if any)
    succeeded: str = ""  # the job's condition type that means it succeeded ("Failed" means failed)
    # A runtime's replicated Job and container that run the trainer (where a runtime owns the pods).
    runtime_job: str = ""
    runtime_container: str = ""
    patch_manager: str = ""  # owner of our runtime patch (the Trainer webhook wants a domain-prefixed path)
    # How a program of the user's own brings up distributed JAX from this engine's environment, where
    # jax.distributed.initialize() alone cannot: it reads JAX_COORDINATOR_ADDRESS only, and its
    # Kubernetes detection needs API access the pods are not given ("" = it works alone: srun).
    own_program_init: str = ('jax.distributed.initialize(num_processes=int(os.environ["JAX_NUM_PROCESSES"]), '
                             'process_id=int(os.environ["JAX_PROCESS_ID"]))')
    # Other kinds a render of this target may create beside the job (clean.sh deletes them after it).
    other_resources: tuple = ()

    @property
    def kubernetes(self) -> bool:
        return bool(self.kind)

    def pod_hostname(self, name: str, index: int) -> str:
        return self.hostname.format(name=name, index=index)

    def coordinator_host(self, name: str) -> str:
        return self.coordinator.format(name=name)

    def facts(self, name: str) -> dict:
        """What the lifecycle scripts need (prepare.sh writes them to the build folder's release.env)."""
        return {"KIND": self.resource, "POD_SELECTOR": self.pod_selector.format(name=name),
                "INDEX_LABEL": self.index_label, "OWNER_LABEL": self.owner_label,
                "OWNS_PODS": str(self.owns_pods).lower(), "SUCCEEDED": self.succeeded,
                "CONTAINER": self.runtime_container or CONTAINER}


_JOBSET_POD_SPEC = ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec")

TARGETS = {t.name: t for t in (
    Target("indexed-job", "indexed-job.yaml.j2", kind="Job", resource="jobs.batch",
           pod_spec_path=("spec", "template", "spec"),
           hostname="{name}-{index}", coordinator="{name}-0.{name}",
           pod_selector="batch.kubernetes.io/job-name={name}", succeeded="Complete"),
    Target("jaxjob", "jaxjob.yaml.j2", kind="JAXJob", resource="jaxjobs.kubeflow.org",
           pod_spec_path=("spec", "jaxReplicaSpecs", "Worker", "template", "spec"),
           hostname="{name}-worker-{index}", coordinator="{name}-worker-0", process_env=False, port_name="jaxjob-port",
           unbuffered=False,
           own_program_init=('jax.distributed.initialize(f\'{os.environ["COORDINATOR_ADDRESS"]}:'
                             '{os.environ["COORDINATOR_PORT"]}\', int(os.environ["NUM_PROCESSES"]), '
                             'int(os.environ["PROCESS_ID"]))'),
           pod_selector="training.kubeflow.org/job-name={name}", index_label="training.kubeflow.org/replica-index",
           succeeded="Succeeded"),
    Target("jobset", "jobset.yaml.j2", kind="JobSet", resource="jobsets.jobset.x-k8s.io",
           pod_spec_path=_JOBSET_POD_SPEC,
           hostname="{name}-worker-0-{index}", coordinator="{name}-worker-0-0.{name}", pod_name_suffix="-abcde",
           restart_budget=("jobset", "max_restarts"),
           pod_selector="jobset.sigs.k8s.io/jobset-name={name}", owner_label="jobset.sigs.k8s.io/jobset-uid",
           succeeded="Completed"),
    # Kubeflow Trainer v2: the TrainJob's runtime (jax-distributed) makes a JobSet with one replicated
    # Job "node" and its JAX plugin sets JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID.
    Target("trainjob", "trainjob.yaml.j2", kind="TrainJob", resource="trainjobs.trainer.kubeflow.org",
           hostname="{name}-node-0-{index}", coordinator="{name}-node-0-0.{name}", process_env=False,
           pod_name_suffix="-abcde",
           runtime_job="node", runtime_container="node", owns_pods=False, engine_port=29500,
           patch_manager="jax-training.dev/pod-template", other_resources=("trainingruntimes.trainer.kubeflow.org",),
           pod_selector="jobset.sigs.k8s.io/jobset-name={name}", succeeded="Complete"),
    Target("slurm", "slurm.sbatch.j2", own_program_init=""),
)}

NAMES = tuple(TARGETS)
KUBERNETES = tuple(name for name, t in TARGETS.items() if t.kubernetes)
LOCAL = tuple(name for name, t in TARGETS.items() if t.pod_spec_path)


def target(values_or_name) -> Target:
    name = values_or_name if isinstance(values_or_name, str) else values_or_name["target"]
    return TARGETS[name]


def cleanup_resources() -> list[str]:
    """What clean.sh deletes, owners first so their controllers do not recreate what it deletes."""
    owners = [TARGETS[name] for name in ("trainjob", "jaxjob", "jobset", "indexed-job")]
    return [r for t in owners for r in (t.resource, *t.other_resources)] + ["services", "pods"]


def shell_facts() -> str:
    """scripts/lib/targets.sh (written by `make generate`): what clean.sh needs without a build
    folder or a Python environment."""
    return ("# Generated from generator/targets.py by `make generate`; do not edit.\n"
            "# shellcheck shell=bash disable=SC2034\n"
            f"CLEANUP_RESOURCES=({' '.join(cleanup_resources())})\n")


def _go_format(python_format: str) -> str:
    """A name/index format as Go's printf takes it from the chart: {name} -> %[1]s, {index} -> %[2]d."""
    return python_format.replace("{name}", "%[1]s").replace("{index}", "%[2]d")


def chart_rows() -> str:
    """charts/jax-training/files/targets.json: the facts the chart's templates read, per Kubernetes
    target (hostname and coordinator as printf formats of name and index; rank0: what `kubectl logs`
    follows for process 0)."""
    import json

    rows = {}
    for name in KUBERNETES:
        t = TARGETS[name]
        row = {"hostname": _go_format(t.hostname), "coordinator": _go_format(t.coordinator),
               "portName": t.port_name, "processEnv": t.process_env, "unbuffered": t.unbuffered,
               "resource": t.resource, "rank0": f"-l '{_go_format(t.pod_selector)},{t.index_label}=0'",
               "ownProgramInit": t.own_program_init}
        optional = {"podNameSuffix": t.pod_name_suffix, "enginePort": t.engine_port, "runtimeJob": t.runtime_job,
                    "runtimeContainer": t.runtime_container, "patchManager": t.patch_manager}
        rows[name] = {**row, **{k: v for k, v in optional.items() if v}}
    return json.dumps(rows, indent=1) + "\n"


def restart_budget(values: dict) -> int:
    node = values
    for key in target(values).restart_budget:
        node = node[key]
    return node


if __name__ == "__main__":
    print(shell_facts(), end="")
