"""`sbatch --test-only` of the rendered layouts on the local SLURM (8 CPUs, 4 fake GPUs, 1 node):
the layouts that fit are accepted as they are, the others are refused with SLURM's reason."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import EXAMPLES_DIR

from .slurm import render_script

# example -> substring of SLURM's answer; the partition is the local one (the examples name "gpu").
FITS = {
    "slurm.json": None,
    "slurm-gpu-4x1.json": None,
    "slurm-gpu-2x2.json": None,
    # 2 nodes x (4 tasks x 2 CPUs): more nodes and more CPUs than there are.
    "slurm-gpu-2nodes.json": ("Node count specification invalid", "More processors requested than permitted"),
}


def example(name: str) -> dict:
    return json.loads((EXAMPLES_DIR / name).read_text())


def submit_test_only(slurm, script, cwd):
    return slurm.run("sbatch", "--test-only", f"--partition={slurm.partition}", str(script), cwd=cwd, check=False)


@pytest.mark.parametrize("name", sorted(FITS))
def test_example_layout(slurm, tmp_path, name):
    script = render_script(example(name), tmp_path)
    proc = submit_test_only(slurm, script, tmp_path)
    refusal = FITS[name]
    if refusal is None:
        assert proc.returncode == 0, proc.stderr
        assert "to start at" in proc.stderr and f"in partition {slurm.partition}" in proc.stderr
    else:
        assert proc.returncode != 0, f"{name} should not fit on one node: {proc.stderr}"
        assert proc.stderr.startswith("allocation failure: ")
        assert any(reason in proc.stderr for reason in refusal), proc.stderr


@pytest.mark.parametrize("change, refusal", [
    ({"hosts_count": 4, "training": {"batch_size": 256}, "slurm": {"cpus_per_task": 1}}, "Requested node configuration is not available"),
    ({"slurm": {"cpus_per_task": 16}}, "More processors requested than permitted"),
], ids=["8 GPUs on a 4-GPU node", "more CPUs than the node"])
def test_layout_beyond_the_node_is_refused(slurm, tmp_path, change, refusal):
    variables = example("slurm-gpu-2x2.json")
    for key, value in change.items():
        variables[key] = {**variables[key], **value} if isinstance(value, dict) else value
    proc = submit_test_only(slurm, render_script(variables, tmp_path), tmp_path)
    assert proc.returncode != 0, proc.stderr
    assert refusal in proc.stderr
