"""The sbatch script of every layout: directives, GPU binding, srun line, and bash syntax.

The byte-for-byte goldens of the examples live with every other render in tests/generator/golden
(tests/generator/test_golden.py); this file checks what those scripts mean.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.paths import EXAMPLES_DIR

from tests.support.jaxgen import jaxgen
from .sbatch import directives, srun_words

SLURM_EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("slurm*.json"))

# The seeds' layouts: (tasks, devices per task, nodes) -> what SLURM must be asked for.
LAYOUTS = {
    "4 tasks x 1 GPU": (4, 1, 1, {"ntasks": "4", "nodes": "1", "ntasks-per-node": "4", "gpus-per-node": "4"}, 1),
    "2 tasks x 2 GPUs": (2, 2, 1, {"ntasks": "2", "nodes": "1", "ntasks-per-node": "2", "gpus-per-node": "4"}, 2),
    "8 GPUs over 2 nodes": (8, 1, 2, {"ntasks": "8", "nodes": "2", "ntasks-per-node": "4", "gpus-per-node": "4"}, 1),
    "2 tasks x 4 GPUs over 2 nodes": (2, 4, 2, {"ntasks": "2", "nodes": "2", "ntasks-per-node": "1",
                                              "gpus-per-node": "4"}, 4),
}


# The nodes' directories, which a slurm render needs named (the defaults are container paths).
HOST_DIRS = ("--set", "data.dir=/shared/mnist", "--set", "checkpoint.dir=/shared/runs")


def render(*args: str, host_dirs: bool = True) -> str:
    result = jaxgen("render", "--target", "slurm", *(HOST_DIRS if host_dirs else ()), *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def bash_syntax_ok(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, timeout=30)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_gpu_layout(layout):
    tasks, per_task, nodes, expected, gpus_per_task = LAYOUTS[layout]
    batch = 64 * tasks * per_task
    script = render("--set", "accelerator=gpu", "--set", f"hosts_count={tasks}",
                    "--set", f"local_device_count={per_task}", "--set", f"slurm.nodes={nodes}",
                    "--set", f"training.batch_size={batch}")
    found = directives(script)
    for key, value in expected.items():
        assert found.get(key) == value, f"{layout}: --{key} is {found.get(key)!r}, want {value!r}"
    srun = srun_words(script)
    # Each task is bound to its own GPUs (CUDA_VISIBLE_DEVICES per task), not all of the node's.
    assert f"--gpus-per-task={gpus_per_task}" in srun
    assert "--kill-on-bad-exit=1" in srun
    assert "--cpus-per-task=1" in srun  # srun does not inherit sbatch's since SLURM 22.05
    trainer = srun[srun.index("-m") - 1:]
    assert trainer[:3] == ["python3", "-m", "trainer"]
    assert "--local-device-count" in script and f"--local-device-count {per_task}" in script
    assert bash_syntax_ok(script).returncode == 0


def test_cpu_layout_asks_for_no_gpu():
    script = render("--set", "slurm.nodes=1", "--set", "local_device_count=2")
    found = directives(script)
    assert "gpus-per-node" not in found and "gres" not in found
    assert not any(w.startswith("--gpus") for w in srun_words(script))
    assert "--platform cpu" in script


def test_nodes_zero_means_one_node_per_task():
    found = directives(render("--set", "hosts_count=4", "--set", "slurm.nodes=0",
                              "--set", "training.batch_size=64"))
    assert (found["nodes"], found["ntasks"], found["ntasks-per-node"]) == ("4", "4", "1")


@pytest.mark.parametrize("example", SLURM_EXAMPLES)
def test_example_script(example):
    values = json.loads((EXAMPLES_DIR / example).read_text())
    script = render(str(EXAMPLES_DIR / example), host_dirs=False)
    check = bash_syntax_ok(script)
    assert check.returncode == 0, check.stderr
    found = directives(script)
    slurm = values["slurm"]
    assert found["job-name"] == values["name"]
    assert found["ntasks"] == str(values["hosts_count"])
    assert found["cpus-per-task"] == str(slurm.get("cpus_per_task", 1))
    assert found["time"] == slurm.get("time", "01:00:00")
    assert found.get("partition") == (slurm.get("partition") or None)
    assert found.get("account") == (slurm.get("account") or None)
    for module in slurm.get("modules", []):
        assert f"module load {module}\n" in script
    for env in values.get("env", []):
        assert f"export {env['name']}=" in script
    srun = srun_words(script)
    image = slurm.get("container_image")
    if image:
        runtime = slurm.get("container_runtime", "apptainer")
        i = srun.index(runtime)
        assert srun[i + 1] == "exec"
        assert ("--nv" in srun) == (values["accelerator"] == "gpu")
        assert image in srun
        for path in (values["data"]["dir"], values["checkpoint"]["dir"]):
            assert srun[srun.index(path) - 1] == "--bind"
    else:
        assert "apptainer" not in srun and "singularity" not in srun


def test_container_on_cpu_has_no_nv():
    script = render("--set", "slurm.nodes=1", "--set", "slurm.container_image=docker://ghcr.io/x/trainer:1",
                    "--set", "slurm.container_runtime=singularity")
    srun = srun_words(script)
    assert srun[srun.index("singularity") + 1] == "exec"
    assert "--nv" not in srun
    assert "docker://ghcr.io/x/trainer:1" in srun


def test_output_written_to_directory(tmp_path):
    out = tmp_path / "out"
    result = jaxgen("render", str(EXAMPLES_DIR / "slurm.json"), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert files == ["mnist-slurm.sbatch"]
    assert (out / files[0]).read_text().startswith("#!/bin/bash\n")


def test_extra_directives_are_sbatch_lines_before_the_first_command():
    script = render("--set", "slurm.nodes=1", "--set", "slurm.extra_directives={--exclusive,--qos=high}")
    found = directives(script)
    assert found["exclusive"] == "" and found["qos"] == "high"
