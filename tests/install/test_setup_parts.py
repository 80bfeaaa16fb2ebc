"""What each set-up installs into a checkout's .venv: `make demo` (scripts/setup.sh demo) what the demo
needs and nothing else (no bucket client, no test tools), `make install` (setup.sh python) adds the s3
extra, and a set-up that has what it asks for installs nothing. `make demo` then trains to the accuracy
the README promises. Without Go (and no helm on PATH), `make install` still links jaxgen and
jax-trainer, says what helm needs and succeeds. Offline, from the wheelhouse setup.sh dev fills."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.checkout import offline_env, tracked_copy
from tests.support.paths import CACHE, MNIST_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    if not any((CACHE / "wheelhouse").glob("jax-*.whl")):
        pytest.fail(f"{CACHE} has no wheelhouse yet: run scripts/setup.sh dev")
    return tracked_copy(tmp_path_factory.mktemp("setup") / "checkout")


def setup(root, part) -> subprocess.CompletedProcess:
    proc = subprocess.run(["scripts/setup.sh", part], cwd=root, env=offline_env(), capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def importable(root, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([root / ".venv" / "bin" / "python", "-c", probe], timeout=60).returncode == 0


def test_the_demo_installs_its_needs_alone_and_install_adds_the_bucket_client(checkout):
    assert "installing jax-training[trainer,plot]" in setup(checkout, "demo").stderr
    assert all(importable(checkout, m) for m in ("generator", "trainer", "jax", "optax", "matplotlib"))
    assert not any(importable(checkout, m) for m in ("boto3", "pytest", "moto", "hypothesis"))
    assert "installing" not in setup(checkout, "demo").stderr  # set up already: nothing to do

    assert "installing jax-training[trainer,plot,s3]" in setup(checkout, "python").stderr
    assert importable(checkout, "boto3") and not importable(checkout, "pytest")
    for part in ("demo", "python"):  # what the venv has covers both: nothing reinstalled, nothing taken away
        assert "installing" not in setup(checkout, part).stderr
    assert importable(checkout, "boto3")


def test_make_demo_trains_to_98_percent_and_says_where_everything_is(checkout):
    setup(checkout, "demo")
    proc = subprocess.run(["make", "demo", f"MNIST_DIR={MNIST_DIR}"], cwd=checkout, env=offline_env(),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout[proc.stdout.rindex("\nresult: "):]
    accuracy = float(re.search(r"result: test accuracy (\d\.\d+)", summary).group(1))
    assert accuracy >= 0.98, summary
    printed = dict(re.findall(r"^  (model|card|metrics|curves|summary): +(\S+)$", summary, re.M))
    assert sorted(printed) == ["card", "curves", "metrics", "model", "summary"], summary
    assert all(Path(path).is_file() and Path(path).is_relative_to(checkout) for path in printed.values())


def test_install_without_go_links_the_python_commands_and_says_what_helm_needs(checkout, tmp_path):
    env = offline_env()
    path = [d for d in env["PATH"].split(os.pathsep) if not (d and (shutil.which("go", path=d) or
                                                                   shutil.which("helm", path=d)))]
    if not all(shutil.which(tool, path=os.pathsep.join(path)) for tool in ("make", "python3", "bash")):
        pytest.skip("go shares a directory with make, python3 or bash here: no PATH without it")
    bindir, cache = tmp_path / "bin", tmp_path / "cache"  # a cache with no helm built yet
    env.update(PATH=os.pathsep.join(path), JAXT_CACHE=str(cache))
    proc = subprocess.run(["make", "install", f"BINDIR={bindir}"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"jaxgen and jax-trainer are in {bindir}" in proc.stderr
    assert f"helm is not in {bindir}: Go builds the tested v4" in proc.stderr and "https://go.dev/doc/install" in \
        proc.stderr
    assert sorted(p.name for p in bindir.iterdir()) == ["jax-trainer", "jaxgen"]
    version = subprocess.run([bindir / "jaxgen", "--version"], capture_output=True, text=True, timeout=60, env=env)
    assert version.returncode == 0 and version.stdout.startswith("jaxgen, version "), version.stderr
