"""Every value reaches the trainer verbatim: the rendered script is run by bash, with `srun` replaced
by a launcher that drops srun's options and runs the task command once, and the "python" being a
recorder of its argv and environment. Hostile strings (quotes, $(...), backticks, globs, spaces)
must arrive unchanged and execute nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.engines.slurm.render import program, render_sbatch
from generator.values import load_values

# Text without NUL or line breaks (the schema rejects those in paths and URLs).
TOKENS = list("ab Z09_-.:'\"$`\\!*?[]{}();&|<>~#%=é") + ["$(touch pwned)", "`touch pwned`", "${HOME}", "'; touch pwned; '"]
hostile = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=10).map("".join)


SRUN_SHIM = """#!/bin/bash
while [[ "${1:-}" == --* ]]; do shift; done
exec "$@"
"""

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["RECORD_FILE"], "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, f)
"""


@pytest.fixture(scope="module")
def shims(tmp_path_factory) -> Path:
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, text in (("srun", SRUN_SHIM), ("record-python", RECORDER.format(python=sys.executable))):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def run_script(script: str, bin_dir: Path, workdir: Path) -> dict:
    record = workdir / "record.json"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_FILE": str(record), "HOME": str(workdir)}
    proc = subprocess.run(["bash", "-s"], input=script, text=True, capture_output=True, timeout=60,
                          cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(record.read_text())


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data_name=hostile, ckpt_name=hostile, mirror_tail=hostile, env_value=hostile)
def test_hostile_values_arrive_verbatim(shims, tmp_path_factory, data_name, ckpt_name, mirror_tail, env_value):
    work = tmp_path_factory.mktemp("run")
    values = load_values([], [
        "target=slurm", "slurm.nodes=1", f"slurm.python={shims / 'record-python'}",
        "data.dir=/shared/mnist", "checkpoint.dir=/shared/runs",  # replaced below, after validation
    ])
    values["data"]["dir"] = f"{work}/data/{data_name}"
    values["checkpoint"]["dir"] = f"{work}/ckpt/{ckpt_name}"
    values["data"]["mirror"] = f"file:///mirror/{mirror_tail}"
    values["env"] = [{"name": "USER_VALUE", "value": env_value}]

    record = run_script(render_sbatch(values), shims, work)
    assert record["argv"] == ["-m", "trainer", *program(values)[1]]
    assert record["env"]["USER_VALUE"] == env_value
    assert os.path.isdir(values["data"]["dir"]) and os.path.isdir(values["checkpoint"]["dir"])
    assert not list(work.rglob("pwned")), "a value was executed by the shell"


def test_a_users_program_arrives_verbatim(shims, tmp_path_factory):
    """program.command replaces `python -m trainer`: srun runs it with its args, each word intact."""
    work = tmp_path_factory.mktemp("run")
    values = load_values([], ["target=slurm", "slurm.nodes=1", "data.dir=/shared/mnist", "checkpoint.dir=/shared/runs"])
    values["program"] = {"command": [str(shims / "record-python"), "my train.py"], "args": ["--x", "$(touch pwned)"]}
    values["data"]["dir"], values["checkpoint"]["dir"] = f"{work}/data", f"{work}/ckpt"
    record = run_script(render_sbatch(values), shims, work)
    assert record["argv"] == ["my train.py", "--x", "$(touch pwned)"]
    assert not list(work.rglob("pwned"))
