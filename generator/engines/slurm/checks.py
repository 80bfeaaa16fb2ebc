"""Semantic rules of the slurm target, each problem as "$.json.path: message".

Called by generator.checks, through the dispatcher, for the targets of this engine.
"""

from __future__ import annotations

import re

from trainer.cluster import SLURM_PORTS
from trainer.contract import MAX_GPUS_PER_HOST

from ... import rules
from ...defaults import defaults
from ...errors import excerpt
from ...paths import go_clean
from ...rules import And, Eq, Gt, Int, Lit, Lt, Or, Present, Rule, Text

SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # whole name: fullmatch, never $
# An #SBATCH line is split by sbatch itself, not by the shell: no quoting is possible there.
DIRECTIVE_UNSAFE = re.compile(r"[\s'\"\\#]")
# Set per task by SLURM itself (a regular expression matching a whole name; the trainer's own
# variables, PROCESS_ENV, are refused on every target).
SLURM_TASK_ENV = r"SLURM_\w*|CUDA_VISIBLE_DEVICES"
SLURM_ENV = re.compile(SLURM_TASK_ENV)
# Variables bash itself keeps read-only (bash(1), "Shell Variables"): assigning one ends the sbatch script.
BASH_READONLY = frozenset({"BASHOPTS", "BASH_VERSINFO", "EUID", "PPID", "SHELLOPTS", "UID"})


# This engine's rules that the rule vocabulary can say (generator/rules.py; never compiled into the chart).
_SLURM, _PORT = "slurm", Int("metrics.port")
_FIRST_PORT, _LAST_PORT = Lit(SLURM_PORTS.start), Lit(SLURM_PORTS.stop - 1)
RULES = (
    Rule("$.slurm.nodes", Gt(Int("slurm.nodes"), Int("hosts_count")), "%d nodes for %d tasks leaves nodes idle",
         (Int("slurm.nodes"), Int("hosts_count")), _SLURM, example={"target": "slurm", "slurm": {"nodes": 3}}),
    # the Kubernetes keys a SLURM job has no use for
    Rule("$.queue_name", Present("queue_name"), "a Kueue queue is for Kubernetes targets; a SLURM job queues in its "
         "partition (set queue_name '' and slurm.partition)", engine=_SLURM,
         example={"target": "slurm", "queue_name": "team"}),
    Rule("$.persistence", Or(Present("persistence.existing_claim"), Present("persistence.enabled")),
         "a PersistentVolumeClaim is for Kubernetes targets; on slurm checkpoint.dir is on the shared filesystem "
         "(set persistence.enabled false and persistence.existing_claim '')", engine=_SLURM,
         example={"target": "slurm", "persistence": {"enabled": True}}),
    Rule("$.program.dir", Present("program.dir"), "a folder sent with the job is for Kubernetes targets; a SLURM "
         "task runs in the folder sbatch was run from (on the shared filesystem): run sbatch there and leave "
         "program.dir empty", engine=_SLURM, example={"target": "slurm", "program": {"dir": "train"}}),
    Rule("$.image.source", Eq(Text("image.source"), "stock"), "a stock image with the trainer sent along is for "
         "Kubernetes targets; a SLURM task runs slurm.python, or slurm.container_image", engine=_SLURM,
         example={"target": "slurm", "image": {"source": "stock"}}),
    Rule("$.metrics.pod_monitor", Present("metrics.pod_monitor"), "a PodMonitor is for Kubernetes targets, not %s",
         (Text("target"),), _SLURM, example={"target": "slurm", "metrics": {"pod_monitor": True}}),
    # the coordinator's port is taken from this range by job id
    Rule("$.metrics.port", And(Gt(_PORT, SLURM_PORTS.start - 1), Lt(_PORT, SLURM_PORTS.stop)),
         "%d is in %d-%d, where a SLURM job's coordinator port is picked from by job id; choose a port below %d",
         (_PORT, _FIRST_PORT, _LAST_PORT, _FIRST_PORT), _SLURM,
         example={"target": "slurm", "metrics": {"port": SLURM_PORTS.start}}),
)


def slurm_errors(values: dict) -> list[str]:
    errors = rules.errors(RULES, values)
    slurm = values["slurm"]
    tasks = values["hosts_count"]
    nodes = slurm["nodes"] or tasks

    if nodes <= tasks and tasks % nodes:
        errors.append(f"$.slurm.nodes: {tasks} tasks (hosts_count) cannot be spread evenly over {nodes} nodes; "
                      f"choose a divisor of {tasks}")
    elif values["accelerator"] == "gpu" and nodes <= tasks:
        per_node = tasks // nodes * values["local_device_count"]
        if per_node > MAX_GPUS_PER_HOST:
            errors.append(f"$.slurm.nodes: {tasks // nodes} tasks x {values['local_device_count']} GPUs = "
                          f"{per_node} GPUs per node (max {MAX_GPUS_PER_HOST}); use more nodes")


    errors += _container_default_dirs(values)
    for key in ("partition", "account", "time", "output"):
        value = slurm[key]
        if isinstance(value, str) and DIRECTIVE_UNSAFE.search(value):
            errors.append(f"$.slurm.{key}: {value!r} goes into an #SBATCH line and must not contain "
                          "whitespace, quotes, backslashes or '#'")
    if slurm["container_image"]:
        if slurm["container_image"].startswith("-"):
            errors.append(f"$.slurm.container_image: {excerpt(slurm['container_image'])!r} starts with '-', which "
                          f"{slurm['container_runtime']} exec would read as an option")
        for key in ("data", "checkpoint"):  # each is bound into the container as is
            directory = values[key]["dir"]
            if "," in directory or ":" in directory:
                errors.append(f"$.{key}.dir: {excerpt(directory)!r} contains ',' or ':', which "
                              f"{slurm['container_runtime']} --bind reads as separators (src:dest,...)")
    for i, entry in enumerate(values.get("env") or []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue  # the schema reports it
        if not SHELL_NAME.fullmatch(name):
            errors.append(f"$.env[{i}].name: {name!r} is not a shell variable name (letters, digits, _), "
                          "which target slurm needs to export it")
        elif name in BASH_READONLY:
            errors.append(f"$.env[{i}].name: {name} is read-only in bash; the sbatch script would stop at it")
        elif SLURM_ENV.fullmatch(name):
            errors.append(f"$.env[{i}].name: {name} is set for each task by SLURM; "
                          "one value for every task would break the ranks")
        if "valueFrom" in entry:
            errors.append(f"$.env[{i}].valueFrom: not supported by target slurm (no Kubernetes API there); "
                          "give a literal value")
    return errors


def _container_default_dirs(values: dict) -> list[str]:
    """data.dir and checkpoint.dir left at their defaults, which are paths inside the Kubernetes pods'
    containers: on slurm they are directories of the nodes that the script creates before srun (at the
    root of each node, which fails for a user and litters it for root)."""
    errors, default = [], defaults()  # a fresh copy of every default: read once
    for key in ("data", "checkpoint"):
        directory = values[key]["dir"]
        if go_clean(directory) == go_clean(default[key]["dir"]):  # /checkpoints/ and /checkpoints/. too
            errors.append(f"$.{key}.dir: {directory} is the default for Kubernetes, a path in the pods' containers; "
                          f"on slurm name a directory of the nodes' shared filesystem, e.g. "
                          f"--set {key}.dir=/scratch/$USER/{'mnist' if key == 'data' else 'runs'}")
    return errors
