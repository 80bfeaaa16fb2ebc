"""Target slurm: renders an sbatch script (text, not YAML) from validated variables.

The script runs the same trainer arguments as the Kubernetes pods under
`srun --kill-on-bad-exit=1`, one task per JAX process. The trainer derives its rank, the process
count and the coordinator (first node of SLURM_STEP_NODELIST, a port picked by SLURM_JOB_ID, trainer/cluster.py)
from SLURM's environment, so no JAX_* variable is rendered. Every value reaches the script through
shlex.quote; values that end up in #SBATCH lines are restricted by .checks.
"""

from __future__ import annotations

import shlex
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from trainer import exit_codes

from ... import targets
from ...errors import TemplateBug
from ...program import device_env, program_args
from ...templating import environment

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


def scalar(value: Any) -> str:
    """The text a value takes on a command line (booleans as true/false, like the manifests)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def shell_quote(value: Any) -> str:
    return shlex.quote(scalar(value))


def program(values: dict) -> tuple[list[str], list[str]]:
    """(command, args) each task runs: the user's program, or `slurm.python -m trainer train ...` with
    the very arguments the pods' containers get."""
    command = values["program"]["command"] or [values["slurm"]["python"], "-m", "trainer"]
    return list(command), program_args(values)


def arg_lines(args: list[str]) -> list[list[str]]:
    """Groups each option with its value, for a readable script (one option per line)."""
    lines: list[list[str]] = []
    for arg in args:
        if lines and not arg.startswith("--") and lines[-1][0].startswith("--") and len(lines[-1]) == 1:
            lines[-1].append(arg)
        else:
            lines.append([arg])
    return lines


def layout(values: dict) -> dict:
    """Nodes, tasks per node and GPUs of the allocation (tasks spread evenly over the nodes)."""
    tasks = values["hosts_count"]
    nodes = values["slurm"]["nodes"] or tasks
    gpu = values["accelerator"] == "gpu"
    per_task = values["local_device_count"]
    return {
        "tasks": tasks,
        "nodes": nodes,
        "tasks_per_node": tasks // nodes,
        "gpus_per_task": per_task if gpu else 0,
        "gpus_per_node": (tasks // nodes) * per_task if gpu else 0,
    }


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return environment(TEMPLATES_DIR, {"q": shell_quote}, trim_blocks=True, lstrip_blocks=True)


def check_bash_syntax(script: str) -> None:
    """Parse the script with `bash -n`, so a template bug fails at render time."""
    proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, timeout=30)
    if proc.returncode != 0:
        raise TemplateBug(f"rendered sbatch script is not valid bash: {proc.stderr.strip()}")


def render_sbatch(values: dict) -> str:
    """The sbatch script of already validated variables (see .checks)."""
    slurm = values["slurm"]
    container = {
        "image": slurm["container_image"],
        "runtime": slurm["container_runtime"],
        "binds": list(dict.fromkeys([values["data"]["dir"], values["checkpoint"]["dir"]])),
    }
    command, args = program(values)
    script = _environment().get_template(targets.target(values).template).render(
        v=values,
        slurm=slurm,
        layout=layout(values),
        command=command,
        arg_lines=arg_lines(args),
        env=[device_env(values)] + [(e["name"], e.get("value", "")) for e in values.get("env") or []],
        container=container,
        extra_directives=slurm["extra_directives"],
        preempted=exit_codes.PREEMPTED,
    )
    check_bash_syntax(script)
    return script


def files(values: dict, fmt: str) -> dict[str, str]:
    """The script as the one file of `jaxgen render -o` (a script has one format: fmt is not read)."""
    return {f"{values['name']}.sbatch": render_sbatch(values)}


def stream(values: dict, fmt: str) -> str:
    return render_sbatch(values)
