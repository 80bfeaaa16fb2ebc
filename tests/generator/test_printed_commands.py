"""The next steps a finished local run prints (`jaxgen results …`, `jax-trainer evaluate …`) run as
printed in the shell that ran it: a checkout's .venv/bin is on no PATH until make install, so they
name the virtualenv's command (relative in the checkout) unless PATH finds that very command."""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.engines.kubernetes.local.collect import finish
from generator.engines.kubernetes.local.plan import LocalJob, ProcessPlan
from generator.runstore import runs
from generator.runstore.intake import RunRecord
from tests.support.paths import REPO_ROOT
from trainer import outputs

VENV_BIN = Path(sys.executable).parent
BARE_PATH = "/usr/bin:/bin"  # a login shell's, without the virtualenv


def finished_run(tmp_path: Path) -> list[str]:
    """What jaxgen run says at the end of a finished job (the summary's lines go to standard output)."""
    source = tmp_path / "claims" / "job"
    (source / outputs.MODEL).mkdir(parents=True)
    (source / outputs.MODEL / outputs.MODEL_FILE).write_bytes(b"")
    (source / outputs.SUMMARY).write_text(json.dumps({"test_accuracy": 0.98, "epochs": 1, "steps": 2}))
    plan = ProcessPlan(0, "job-0", ["python"], {})
    started = time.time() - 60
    record = RunRecord(tmp_path / "outputs" / "job", runs.new_run_id(started), started)
    record.folder.mkdir(parents=True)
    said = []
    finish(LocalJob([plan], tmp_path / "scratch", outputs_dir=source), "job", record, 0, said.append)
    return said


def next_steps(tmp_path, capsys) -> dict[str, str]:
    said = finished_run(tmp_path)
    printed = capsys.readouterr().out
    results = re.search(r"`([^`]+ results) ", said[0]).group(1)
    evaluate = re.search(r"^  evaluate: +(.+ evaluate) --model ", printed, re.M).group(1)
    return {"jaxgen": results.removesuffix(" results"), "jax-trainer": evaluate.removesuffix(" evaluate")}


def runs_here(command: str, cwd: Path, path: str) -> bool:
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}, "PATH": path}
    proc = subprocess.run(["bash", "-c", f"{command} --help"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    return proc.returncode == 0


@pytest.mark.parametrize("inside", [True, False])
def test_without_the_virtualenv_on_path_the_next_steps_name_its_commands(tmp_path, capsys, monkeypatch, inside):
    if not (VENV_BIN / "jaxgen").is_file():
        pytest.skip(f"{VENV_BIN} has no jaxgen: the tests run outside the project's virtualenv")
    here = REPO_ROOT if inside else tmp_path
    monkeypatch.chdir(here)
    monkeypatch.setenv("PATH", BARE_PATH)
    commands = next_steps(tmp_path, capsys)
    for name, command in commands.items():
        assert Path(shlex.split(command)[0]).resolve() == (VENV_BIN / name).resolve(), command
        assert command.startswith(".venv/") if inside and VENV_BIN == REPO_ROOT / ".venv" / "bin" else \
            command.startswith("/"), command
        assert runs_here(command, here, BARE_PATH), command


def test_with_the_commands_on_path_the_next_steps_name_them_alone(tmp_path, capsys, monkeypatch):
    if not (VENV_BIN / "jaxgen").is_file():
        pytest.skip(f"{VENV_BIN} has no jaxgen: the tests run outside the project's virtualenv")
    linked = tmp_path / "bin"  # as make install links them
    linked.mkdir()
    for name in ("jaxgen", "jax-trainer"):
        os.symlink(VENV_BIN / name, linked / name)
    monkeypatch.setenv("PATH", f"{linked}:{BARE_PATH}")
    assert next_steps(tmp_path, capsys) == {"jaxgen": "jaxgen", "jax-trainer": "jax-trainer"}
