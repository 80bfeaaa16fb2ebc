"""README's install step puts the commands on PATH (jaxgen, jax-trainer and helm), and the README's
first command after it works as printed: the block under "## Install" runs line by line in a shell
whose PATH has no virtualenv."""

import os
import re
import subprocess

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(300)


def install_block() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


@pytest.mark.slow
def test_the_readme_install_step_puts_jaxgen_on_path(tmp_path):
    lines = install_block()
    assert lines[0] == "make install" and lines[1].startswith("jaxgen "), lines
    bindir = tmp_path / "bin"
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "venv" not in p)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(BINDIR=str(bindir), PATH=f"{bindir}{os.pathsep}{path}")
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=240, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"{line}: {proc.stderr[-2000:]}"
    assert (bindir / "jaxgen").exists() and (bindir / "jax-trainer").exists()
    helm = subprocess.run(["helm", "version", "--short"], env=env, capture_output=True, text=True, timeout=60)
    assert helm.returncode == 0 and helm.stdout.startswith("v"), helm.stderr
    assert "kind: Job" in proc.stdout and "kind: Service" in proc.stdout  # the render, printed
    trainer = subprocess.run(["jax-trainer", "train", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert trainer.returncode == 0 and "--epochs" in trainer.stdout, trainer.stderr
