"""The facts only Kubernetes manifests use, in one place: both renderers (jaxgen's templates and the
Helm chart) and the scripts read them. What the trainer process itself reads (its env names, metrics
path, exit codes, ports) is trainer/contract.py's.

Facts only: this module imports nothing of generator/, so it closes no import cycle (the one engine
module a command may import, tests/generator/test_import_graph.py). The chart reads
these facts from charts/jax-training/files/contract.json and the shell scripts from
scripts/lib/contract.sh, both written by chart_files.py on `make generate` (a test checks they are
current); the hand-written schema's name-length limits are filled in from here too.
"""

from __future__ import annotations

from trainer import exit_codes

# The labels every object and pod of a release carries, and so the selector that finds them all.
APP_NAME = "jax-training"
NAME_LABEL, INSTANCE_LABEL = "app.kubernetes.io/name", "app.kubernetes.io/instance"
PROJECT_SELECTOR = f"{NAME_LABEL}={APP_NAME}"


def release_selector(name: str) -> str:
    """The label selector of every object and pod of release `name`."""
    return f"{PROJECT_SELECTOR},{INSTANCE_LABEL}={name}"


# The pod annotation an Indexed Job (and a JobSet's child Job) numbers its pods with (the target
# table's index label, targets.COMPLETION_INDEX_KEY, which a test holds equal: this module imports no
# generator/ module); the renders pass it to the trainer as JAX_PROCESS_ID through the downward API.
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

# Kubernetes' limits: a DNS-1123 label (a pod hostname, a label value), a DNS-1123 subdomain (an
# object name such as a claimName), a qualified name (a label key: an optional subdomain prefix, a
# slash and a label), and the bytes of one object's annotations, keys and values.
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_KEY_MAX = DNS_SUBDOMAIN_MAX + 1 + DNS_LABEL_MAX
ANNOTATIONS_MAX_BYTES = 256 * 1024
# The hand-written schema names a limit (`"x-max-length": "dns-label"`) where the complete schema has
# its maxLength (scripts/generate.py).
LENGTH_LIMITS = {"dns-label": DNS_LABEL_MAX, "dns-subdomain": DNS_SUBDOMAIN_MAX, "label-key": LABEL_KEY_MAX}

# A Kubernetes quantity's suffixes and their factors (1.5Gi is 1.5 x 2^30), as decimal text that Go's
# and Python's float parsers read alike; an exponent (1e3) is part of the number.
QUANTITY_SUFFIXES = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "k": "1e3", "M": "1e6", "G": "1e9", "T": "1e12",
                     "P": "1e15", "E": "1e18", **{f"{s}i": str(2 ** (10 * n)) for n, s in enumerate("KMGTPE", 1)}}

# A container's resources as the API server takes them: a name without a domain is one of these (or
# hugepages-<size>); huge pages and a domain's resource other than kubernetes.io's are never
# overcommitted, so their request needs a limit, equal to it.
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGE_PAGES_PREFIX = "hugepages-"
NATIVE_RESOURCE_DOMAIN = "kubernetes.io/"

# The user and group the trainer runs as: the image's USER (trainer/Dockerfile's RUN_AS_ID build
# argument, which scripts/image.sh passes from scripts/lib/contract.sh), the pods'
# runAsUser/runAsGroup/fsGroup, and the owner of a host directory the pods write to. 10000 or above,
# so that it is no user of the node's own (distributions hand out ids from 1000 up).
RUN_AS_ID = 10000

# The extended resource a GPU pod requests (and the taint GPU nodes carry).
GPU_RESOURCE = "nvidia.com/gpu"

# The taints the node lifecycle controller puts on a node whose kubelet stopped reporting (unreachable)
# or reports not ready; every pod tolerates them for failure.node_lost_seconds (NoExecute), where the
# API server's default is 300 s, unless a toleration of the user's names the same key and effect.
# What then frees the rank of a node that never returns: deleting its Node, or OUT_OF_SERVICE_TAINT.
NODE_LOST_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
NODE_LOST_EFFECT = "NoExecute"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


# The pod volume mounted at checkpoint.dir: the job's outputs.
CHECKPOINTS_VOLUME = "checkpoints"
# The job object's record of where its outputs are (generator/runstore/location.py): the directory in
# process 0's container, and with outputs.uri the bucket's copy; `jaxgen status` and `jaxgen run` read them.
OUTPUTS_DIR_ANNOTATION = "jax-training.dev/outputs-dir"
OUTPUTS_URI_ANNOTATION = "jax-training.dev/outputs-uri"

# What the renders set in the container beside the trainer's PROCESS_ENV (unbuffered logs): a user
# env entry of that name, like one given twice, would be a second entry of one name, which Helm 4's
# server-side apply refuses.
UNBUFFERED_ENV = "PYTHONUNBUFFERED"
RENDERED_ENV = (UNBUFFERED_ENV,)
# The container env that outputs.secret fills, each from the Secret's key of the same name: what every
# S3 client reads its credentials from (trainer/bucket.py).
BUCKET_CREDENTIALS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")

# The coordinator Service's (targets.Hosts.service): its pod is the engine's, which no linter of the
# render can see.
COORDINATOR_SERVICE_ANNOTATIONS = {"ignore-check.kube-linter.io/dangling-service":
                                   "It selects the pod of process 0, which the job's controller creates."}

# The name of the trainer's Prometheus port (trainer/monitoring.py), which a PodMonitor selects.
METRICS_PORT_NAME = "metrics"

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
# The Indexed Job's processes that end with these codes restart in place, in their pods (container
# restart rules, where the Kubernetes version has them): a gang that lost one pod replaces that one,
# and the Job controller's pod-failure backoff (10 s, doubled for each failed pod since the last
# success; it has no setting) counts one failure per fault instead of one per host.
IN_PLACE_RESTART = "ignore"
# Where such a process finds its pod's UID (trainer/rejoin.py: restarted in place after its gang had
# met, it waits for a lost peer's replacement without the init timeout).
POD_UID_FIELD = "metadata.uid"
# A JobSet restarts on the first failed child Job it sees, and counts the restart or not by the code of
# the pod that failed it (JOBSET_FAILURE_RULES); the processes that only saw their peer die (141)
# wait this long before they exit (trainer/supervisor.py), so that the pod that died, whose kubelet
# reports it within 1-3 s, is that pod: a crash (1, 137) counts, a disruption (143, DisruptionTarget)
# does not. Otherwise a peer's 141 came first almost always, and a crash that recurs restarted the
# JobSet without end. The controller's restart ends the wait (SIGTERM); ending running pods rather than
# ended ones costs a crash's recovery a fraction of a second (docs/kubernetes.md).
PEER_LOST_WAIT_SECONDS = 10
# A JAXJob's runPolicy.backoffLimit, at least this. The training-operator (v1.9) counts no retry: a
# backoffLimit of 0 fails the JAXJob on its first failed pod whatever its code (a stopped, preempted
# or lost one included), and any higher one never fails it; its restartPolicy ExitCode restarts a pod
# that ended with 128 or more (141, 142, 143, a SIGKILL's 137) and fails the job on a lower code. So
# backoff_limit 0 (the default: a crash fails the job) renders 1, with which a stop restarts the
# gang as on every other target (docs/kubernetes.md).
JAXJOB_BACKOFF_LIMIT_FLOOR = 1
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
