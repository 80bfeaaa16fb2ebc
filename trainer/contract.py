"""The facts the trainer process itself relies on (the env names it reads, its flags, its metrics
path, the image's directories) that both renderers (jaxgen and the Helm chart) must respect.

Standard library only: jaxgen imports it, and it ships in the trainer image with the rest of
trainer/. The chart reads these facts from charts/jax-training/files/contract.json, written by
`make generate` (a test checks it is current). The facts only Kubernetes manifests use live with
the Kubernetes engine (generator/engines/kubernetes/policy.py); exit codes in trainer/exit_codes.py.
"""

from __future__ import annotations

from trainer import cluster, config
from trainer.fencing import ATTEMPT_ENV
from trainer.goodput import LAUNCHED_ENV
from trainer.rejoin import POD_UID_ENV
from trainer.supervisor import PEER_LOST_WAIT_ENV, SUPERVISED_ENV

# GPUs one host (pod or SLURM node) may hold: the most any machine offers.
MAX_GPUS_PER_HOST = 16

# Directories the data and the outputs may not be mounted at: the root, and the pods' own scratch.
SYSTEM_DIRS = ("/", "/tmp")
# Directories the image (trainer/Dockerfile) and the kernel provide: the data and the outputs may be
# mounted neither at one, nor inside one, nor over a folder that holds one (which hides it).
IMAGE_DIRS = ("/opt/venv", "/opt/jax-training", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc",
              "/dev", "/proc", "/sys")

# The built-in trainer's flags that say where a job's outputs go, each rendered from one variable:
# program.args may not set them (in any spelling), or the results would be where neither jaxgen run
# nor run.sh looks for them.
OUTPUT_FLAGS = {config.flag(f): f.metadata["variable"]
                for f in config.fields_named("checkpoint_dir", "run_name", "outputs_uri", "outputs_endpoint")}

# The built-in trainer's other flags that name a path it reads or writes: in a pod only its volumes
# are writable (the root filesystem is read-only), and `jaxgen run` finds each such path in the folder
# standing in for its volume.
PATH_FLAGS = tuple(config.flag(f) for f in config.fields_named("data_dir", "metrics_file", "compilation_cache"))

# The trainer's Prometheus endpoint path (trainer/monitoring.py), which the scrape annotations name.
METRICS_PATH = "/metrics"

# The environment variables the trainer reads its place in the job from (trainer/cluster.py): the
# renders or the engine set them per process, so a user env entry with one of these names is refused
# on every target (one value for every process would break the ranks). SLURM's own are the SLURM
# engine's (engines/slurm/checks.py).
PROCESS_ENV = cluster.launcher_env_names(*(la for la in cluster.LAUNCHERS if la != cluster.SLURM))

# The trainer's internal variables: what the job's launchers and the trainer itself set for its own
# processes (the attempt that fences off an older one, a supervised child's start and role, a lost
# peer's wait, the pod whose container restarts in place, what `jaxgen run` tells its processes). A
# user env entry with one of these names is refused on every target: it would end every process, or
# switch attempt fencing off.
INTERNAL_ENV = (ATTEMPT_ENV, LAUNCHED_ENV, SUPERVISED_ENV, PEER_LOST_WAIT_ENV, POD_UID_ENV,
                config.FROM_VARIABLES_ENV, config.EPHEMERAL_OUTPUTS_ENV)
