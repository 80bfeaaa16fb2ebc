"""Set-up belongs to its checkout: `make install` in one checkout, then in another, and each one's
jaxgen (the linked command and its .venv's) still runs that checkout's own code. The installs are
offline, from the wheelhouse scripts/setup.sh fills, so this takes seconds per checkout."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.checkout import offline_env, tracked_copy
from tests.support.paths import BIN, CACHE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

DOCSTRING = "Validate jax-training variables files and render their manifests."


def jaxgen_help(command) -> str:
    proc = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=60,
                          env=offline_env())
    assert proc.returncode == 0, proc.stderr
    return " ".join(proc.stdout.split())  # as one line: click wraps the description


def test_two_checkouts_set_up_one_after_the_other_each_run_their_own_code(tmp_path):
    if not any((CACHE / "wheelhouse").glob("jax-*.whl")) or not (BIN / "helm").exists():
        pytest.fail(f"{CACHE} has no wheelhouse or helm yet: run scripts/setup.sh dev helm")
    checkouts = {}
    for name in ("first", "second"):
        root = tracked_copy(tmp_path / name)
        cli = root / "generator" / "cli.py"
        assert DOCSTRING in cli.read_text()
        cli.write_text(cli.read_text().replace(DOCSTRING, f"{DOCSTRING} (the {name} checkout)"))
        bindir = tmp_path / f"{name}-bin"
        proc = subprocess.run(["make", "install", f"BINDIR={bindir}"], cwd=root, env=offline_env(),
                              capture_output=True, text=True, timeout=540, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert (root / ".venv" / "bin" / "python").exists()  # the checkout's own virtualenv
        checkouts[name] = root, bindir

    for name, (root, bindir) in checkouts.items():  # the first one too, after the second's set-up
        for command in (bindir / "jaxgen", root / ".venv" / "bin" / "jaxgen"):
            text = jaxgen_help(command)
            assert f"(the {name} checkout)" in text, f"{command} runs another checkout's code:\n{text}"
        assert (bindir / "jax-trainer").resolve() == (root / ".venv" / "bin" / "jax-trainer").resolve()
        # make install's helm: the one on PATH when it is of the tested major or newer, else linked here
        assert shutil.which("helm", path=f"{bindir}{os.pathsep}{offline_env()['PATH']}")
