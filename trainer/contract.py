"""The facts the trainer, both renderers (jaxgen and the Helm chart) and the shell scripts share.

Standard library only: jaxgen imports it, and it ships in the trainer image with the rest of
trainer/. The chart reads these facts from charts/jax-training/files/contract.json and the shell
scripts from scripts/lib/contract.sh, both written from here by `make generate` (a test checks they
are current). A fact that more than one of them needs goes here, and only here.
"""

from __future__ import annotations

import json

from trainer import cluster, config, exit_codes
from trainer.fencing import ATTEMPT_ENV

# The pod annotation an Indexed Job (and a JobSet's child Job) numbers its pods with; the renders
# pass it to the trainer as JAX_PROCESS_ID through the downward API.
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_FIELD = f"metadata.annotations['{COMPLETION_INDEX_KEY}']"

# Kubernetes' limits: a DNS-1123 label (a pod hostname, a label value), a DNS-1123 subdomain (an
# object name such as a claimName), and the bytes of one object's annotations, keys and values.
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
ANNOTATIONS_MAX_BYTES = 256 * 1024

# GPUs one host (pod or SLURM node) may hold: the most any machine offers.
MAX_GPUS_PER_HOST = 16

# Directories the data and the outputs may not be mounted at: the root, and the pods' own scratch.
SYSTEM_DIRS = ("/", "/tmp")
# Directories the image (trainer/Dockerfile) and the kernel provide: the data and the outputs may be
# mounted neither at one, nor inside one, nor over a folder that holds one (which hides it).
IMAGE_DIRS = ("/opt/venv", "/opt/jax-training", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc",
              "/dev", "/proc", "/sys")

# A Kubernetes quantity's suffixes and their factors (1.5Gi is 1.5 x 2^30), as decimal text that Go's
# and Python's float parsers read alike; an exponent (1e3) is part of the number.
QUANTITY_SUFFIXES = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "k": "1e3", "M": "1e6", "G": "1e9", "T": "1e12",
                     "P": "1e15", "E": "1e18", **{f"{s}i": str(2 ** (10 * n)) for n, s in enumerate("KMGTPE", 1)}}

# The built-in trainer's flags that say where a job's outputs go, each rendered from one variable:
# program.args may not set them (in any spelling), or the results would be where neither jaxgen run
# nor run.sh looks for them.
OUTPUT_FLAGS = {config.flag(f): f.metadata["variable"] for f in config.fields_named("checkpoint_dir", "run_name")}

# The user and group the trainer runs as: the image's USER (trainer/Dockerfile's RUN_AS_ID build
# argument, which scripts/image.sh passes), the pods' runAsUser/runAsGroup/fsGroup, and the owner of a
# host directory the pods write to. 10000 or above, so that it is no user of the node's own
# (distributions hand out ids from 1000 up).
RUN_AS_ID = 10000

# The trainer's Prometheus endpoint (trainer/monitoring.py): the container port's name, which a
# PodMonitor selects, and the path the scrape annotations name.
METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"

# The environment variables the trainer reads its place in the job from (trainer/cluster.py): the
# renders or the engine set them per process, so a user env entry with one of these names is refused
# on every target (one value for every process would break the ranks). SLURM's own are SLURM_TASK_ENV's.
PROCESS_ENV = cluster.launcher_env_names(*(la for la in cluster.LAUNCHERS if la != cluster.SLURM))
# What the renders set in the container beside PROCESS_ENV (unbuffered logs): a user env entry of
# that name, like one given twice, would be a second entry of one name, which Helm 4's server-side
# apply refuses.
RENDERED_ENV = ("PYTHONUNBUFFERED",)
# What SLURM itself sets for each task (a regular expression matching a whole name): refused on target slurm too.
SLURM_TASK_ENV = r"SLURM_\w*|CUDA_VISIBLE_DEVICES"

# The failure rules of an Indexed Job's podFailurePolicy: in order, each rule's action and what it
# matches, an exit-code action of trainer/exit_codes.py or a pod condition. A permanent error fails
# the Job at once; a disruption and the "ignore" codes (a stop signal, a lost peer) restart the pod
# without counting; retryable codes count against the limit.
POD_FAILURE_RULES = (
    ("FailJob", "fail"),
    ("Ignore", "DisruptionTarget"),
    ("Ignore", "ignore"),
    ("Count", "retry"),
)
# The same for a Job a JobSet owns (ours and a TrainJob runtime's): a disruption and the "ignore"
# codes fail the Job at once too, and the JobSet (JOBSET_FAILURE_RULES) recreates its Jobs without
# counting. Replacing the pod inside the Job would wait for the Job controller's pod-failure backoff
# (10 s, doubled for every earlier failed pod of the Job, ignored ones included, never reset before
# a pod succeeds); a recreated Job starts its pods at once.
CHILD_JOB_FAILURE_RULES = (
    ("FailJob", "fail"),
    ("FailJob", "DisruptionTarget"),
    ("FailJob", "ignore"),
    ("Count", "retry"),
)
# The failurePolicy rules of a JobSet, matched against the failed child Job's reason and message
# (the Job controller's "failed with exit code N matching FailJob rule" or "has condition C matching
# FailJob rule"): a stop or a disruption restarts the JobSet without counting; any other FailJob (a
# permanent error) fails it; any other failure (a retryable code) restarts it, counted against
# maxRestarts.
JOBSET_FAILURE_RULES = (
    {"name": "Stopped", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"],
     "onJobFailureMessagePatterns": [
         f"failed with exit code ({'|'.join(map(str, exit_codes.codes('ignore')))}) matching FailJob rule",
         "has condition DisruptionTarget matching FailJob rule"]},
    {"name": "PermanentError", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
)


def pod_failure_policy(container: str, failure_rules=POD_FAILURE_RULES) -> dict:
    """Failure rules (POD_FAILURE_RULES, CHILD_JOB_FAILURE_RULES) as a podFailurePolicy for the
    trainer's container."""
    rules = []
    for action, match in failure_rules:
        if match in ("fail", "ignore", "retry"):
            codes = {"containerName": container, "operator": "In", "values": exit_codes.codes(match)}
            rules.append({"action": action, "onExitCodes": codes})
        else:
            rules.append({"action": action, "onPodConditions": [{"type": match, "status": "True"}]})
    return {"rules": rules}


def chart_json() -> str:
    """charts/jax-training/files/contract.json: the facts as the chart's templates read them."""
    facts = {
        "completionIndexField": COMPLETION_INDEX_FIELD,
        "dnsLabelMax": DNS_LABEL_MAX,
        "dnsSubdomainMax": DNS_SUBDOMAIN_MAX,
        "annotationsMaxBytes": ANNOTATIONS_MAX_BYTES,
        "maxGpusPerHost": MAX_GPUS_PER_HOST,
        "systemDirs": list(SYSTEM_DIRS),
        "imageDirs": list(IMAGE_DIRS),
        "quantitySuffixes": QUANTITY_SUFFIXES,
        "runAsId": RUN_AS_ID,
        "processEnv": list(PROCESS_ENV),
        "renderedEnv": list(RENDERED_ENV),
        "outputFlags": OUTPUT_FLAGS,
        "localDeviceCountEnv": cluster.LOCAL_DEVICE_COUNT_ENV,
        "attemptEnv": ATTEMPT_ENV,
        "podFailureRules": [{"action": action, "match": match} for action, match in POD_FAILURE_RULES],
        "childJobFailureRules": [{"action": action, "match": match} for action, match in CHILD_JOB_FAILURE_RULES],
        "jobSetFailureRules": list(JOBSET_FAILURE_RULES),
        "metricsPortName": METRICS_PORT_NAME,
        "metricsPath": METRICS_PATH,
    }
    return json.dumps(facts, indent=1) + "\n"


def shell_facts() -> str:
    """scripts/lib/contract.sh: the facts as the shell scripts source them."""
    return ("# Generated from trainer/contract.py by `make generate`; do not edit.\n"
            "# shellcheck shell=bash disable=SC2034\n"
            f"RUN_AS_ID={RUN_AS_ID}\n")
