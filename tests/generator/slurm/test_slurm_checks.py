"""Variables the slurm target cannot honour: exit 2, the JSON path named, nothing written."""

from __future__ import annotations

import re

import pytest

from generator.engines.slurm.checks import SLURM_TASK_ENV
from tests.support.jaxgen import jaxgen
from trainer.contract import PROCESS_ENV

BAD = {
    "uneven tasks per node": (["hosts_count=3", "slurm.nodes=2", "training.batch_size=96"], "$.slurm.nodes"),
    "too many GPUs per node": (["accelerator=gpu", "hosts_count=4", "local_device_count=8", "slurm.nodes=1",
                                "training.batch_size=128"], "$.slurm.nodes"),
    "output with a space": (["slurm.output=my job-%j.out"], "$.slurm.output"),
    "container image read as an option": (["slurm.container_image=-x"], "$.slurm.container_image"),
    "bind with a colon": (["slurm.container_image=/i.sif", "data.dir=/data/a:b"], "$.data.dir"),
    "bind with a comma": (["slurm.container_image=/i.sif", "checkpoint.dir=/ck/a\\,b"], "$.checkpoint.dir"),
    "output with a quote": (["slurm.output=x'%j.out"], "$.slurm.output"),
    "directive with a space": (["slurm.extra_directives={--qos=high --mem=0}"], "$.slurm.extra_directives[0]"),
    "directive not an option": (["slurm.extra_directives={exclusive}"], "$.slurm.extra_directives[0]"),
    "env not a shell name": (["env[0].name=my.var,env[0].value=x"], "$.env[0].name"),
    "env overrides the rank": (["env[0].name=JAX_PROCESS_ID,env[0].value=x"], "$.env[0].name"),
    "env overrides SLURM": (["env[0].name=OK,env[0].value=x,env[1].name=SLURM_PROCID,env[1].value=x"], "$.env[1].name"),
    "metrics port among the coordinator's": (["metrics.port=61440"], "$.metrics.port"),
    # the defaults are paths in the Kubernetes pods' containers, which the script would create on each node
    "data.dir left at the container default": (["checkpoint.dir=/shared/runs"], "$.data.dir"),
    "checkpoint.dir left at the container default": (["data.dir=/shared/mnist"], "$.checkpoint.dir"),
    "a folder sent with the job": (["program.dir=train"], "$.program.dir"),
    "a stock image": (["image.source=stock"], "$.image.source"),
    "the container default, spelled otherwise": (["data.dir=/data/mnist/", "checkpoint.dir=/checkpoints/."],
                                                 "$.checkpoint.dir"),
    "env from the Kubernetes API": (["env[0].name=POD,env[0].valueFrom.fieldRef.fieldPath=metadata.name"],
                                    "$.env[0].valueFrom"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejected(case, tmp_path):
    sets, path = BAD[case]
    args = ["render", "--target", "slurm", "-o", str(tmp_path / "out")]
    for assignment in ["slurm.nodes=1"] + sets:
        args += ["--set", assignment]
    result = jaxgen(*args)
    assert result.exit_code == 2, result.stdout
    assert path in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_same_values_fine_for_kubernetes():
    # The slurm-only rules do not constrain the other targets.
    result = jaxgen("render", "--target", "indexed-job", "--set", "hosts_count=3",
                    "--set", "slurm.nodes=2", "--set", "training.batch_size=96")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("name", [*PROCESS_ENV, "SLURM_NTASKS", "SLURM_PROCID", "CUDA_VISIBLE_DEVICES"])
def test_every_name_the_ranks_are_read_from_is_refused(name):
    """The trainer's contract (trainer.contract.PROCESS_ENV) and SLURM's own per-task variables
    (SLURM_TASK_ENV): the sbatch script would export one value for every task."""
    assert name in PROCESS_ENV or re.fullmatch(SLURM_TASK_ENV, name)
    result = jaxgen("render", "--target", "slurm", "--set", f"slurm.nodes=1,env[0].name={name},env[0].value=eight")
    assert result.exit_code == 2 and f"$.env[0].name: {name} is set for each" in result.stderr, result.stderr


def test_the_nodes_directories_are_named_by_the_user():
    """A render with the container defaults is refused with a line that says what to set; named, they are
    the directories the script creates before srun."""
    refused = jaxgen("render", "--target", "slurm")
    assert refused.exit_code == 2
    assert ("$.checkpoint.dir: /checkpoints is the default for Kubernetes, a path in the pods' containers; "
            "on slurm name a directory of the nodes' shared filesystem, e.g. --set checkpoint.dir=") in refused.stderr
    script = jaxgen("render", "--target", "slurm", "--set", "data.dir=/shared/mnist", "--set", "checkpoint.dir=/shared/runs")
    assert script.exit_code == 0, script.stderr
    assert "mkdir -p /shared/mnist /shared/runs\n" in script.stdout
