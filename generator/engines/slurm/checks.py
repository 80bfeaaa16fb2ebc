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
from ...names import outputs_claim
from ...rules import Gt, Int, Rule

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
RULES = (
    Rule("$.slurm.nodes", Gt(Int("slurm.nodes"), Int("hosts_count")), "%d nodes for %d tasks leaves nodes idle",
         (Int("slurm.nodes"), Int("hosts_count")), "slurm", example={"target": "slurm", "slurm": {"nodes": 3}}),
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

    if values["queue_name"]:
        errors.append("$.queue_name: a Kueue queue is for Kubernetes targets; a SLURM job queues in its partition "
                      "(set queue_name '' and slurm.partition)")

    if outputs_claim(values):
        errors.append("$.persistence: a PersistentVolumeClaim is for Kubernetes targets; on slurm checkpoint.dir "
                      "is on the shared filesystem (set persistence.enabled false and persistence.existing_claim '')")
    if values["metrics"]["pod_monitor"]:
        errors.append(f"$.metrics.pod_monitor: a PodMonitor is for Kubernetes targets, not {values['target']}")
    metrics_port = values["metrics"]["port"]
    if metrics_port in SLURM_PORTS:  # the coordinator's port is taken from this range by job id
        errors.append(f"$.metrics.port: {metrics_port} is in {SLURM_PORTS.start}-{SLURM_PORTS.stop - 1}, where a "
                      "SLURM job's coordinator port is picked from by job id; choose a port below "
                      f"{SLURM_PORTS.start}")

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
    errors = []
    for key in ("data", "checkpoint"):
        directory = values[key]["dir"]
        if directory == defaults()[key]["dir"]:
            errors.append(f"$.{key}.dir: {directory} is the default for Kubernetes, a path in the pods' containers; "
                          f"on slurm name a directory of the nodes' shared filesystem, e.g. "
                          f"--set {key}.dir=/scratch/$USER/{'mnist' if key == 'data' else 'runs'}")
    return errors
