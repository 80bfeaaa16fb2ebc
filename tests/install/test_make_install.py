"""`make install` and Helm: a Helm of the tested major or newer already on PATH is used as it is (nothing
built); otherwise the tested one is linked, built with Go only when the cache has none yet (saying it
takes about 10 minutes). jaxgen and jax-trainer are linked first, and make install succeeds whatever helm
lacks, saying what. The checkout's virtualenv is stood in for by one set up already (its stamp), with
fake helm and go on PATH: this takes seconds."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest

from tests.support.paths import REPO_ROOT

TESTED = next(line.split("=", 1)[1] for line in (REPO_ROOT / "scripts" / "lib" / "common.sh").read_text().splitlines()
              if line.startswith("HELM_VERSION="))
SYSTEM = "/usr/bin:/bin"


def executable(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(0o755)


@pytest.fixture
def checkout_venv(tmp_path):
    """A virtualenv make install finds set up for this checkout (setup.sh's stamp): nothing is installed."""
    if shutil.which("go", path=SYSTEM) or shutil.which("helm", path=SYSTEM):
        pytest.skip(f"go or helm is in {SYSTEM} here: no PATH without them")
    venv = tmp_path / "venv"
    for name in ("python", "jaxgen", "jax-trainer"):
        executable(venv / "bin" / name, "exit 0")
    key = hashlib.sha256(b"".join((REPO_ROOT / p).read_bytes() for p in ("pyproject.toml", "trainer/constraints.txt")))
    (venv / ".jax-training-install").write_text(f"{key.hexdigest()} {REPO_ROOT} test\n")
    return venv


def make_install(tmp_path, venv, *, helm: str | None = None, go: bool = False) -> subprocess.CompletedProcess:
    """make install with a helm that says `helm` as its version on PATH (None: no helm), and Go or not."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    if helm is not None:
        executable(fake / "helm", f"echo '{helm}'")
    if go:  # go install writes a helm that says the tested version into $GOBIN
        executable(fake / "go", f"""printf '#!/bin/sh\\necho {TESTED}\\n' >"$GOBIN/helm" && chmod +x "$GOBIN/helm"
                                    echo "go $*" >>'{tmp_path / "go-calls"}'""")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "VENV", "VIRTUAL_ENV")}
    env.update(PATH=f"{fake}:{SYSTEM}", JAXT_VENV=str(venv), JAXT_CACHE=str(tmp_path / "cache"))
    return subprocess.run(["make", "-s", "install", f"BINDIR={tmp_path / 'bin'}"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def linked(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "bin").iterdir())


@pytest.mark.parametrize("version", ["v4.1.0+g1a2b3c4", "v5.0.0"])
def test_a_helm_of_the_tested_major_or_newer_on_path_is_used_and_nothing_is_built(tmp_path, checkout_venv, version):
    proc = make_install(tmp_path, checkout_venv, helm=version, go=True)
    assert proc.returncode == 0, proc.stderr
    assert f"helm: {tmp_path / 'fake' / 'helm'} ({version}) is used" in proc.stderr, proc.stderr
    assert "building" not in proc.stderr and not (tmp_path / "go-calls").exists()
    assert linked(tmp_path) == ["jax-trainer", "jaxgen"]  # the helm on PATH stays the one that runs


@pytest.mark.parametrize("helm", [None, "v3.14.2+g5b1b9fe", "nonsense"])
def test_without_such_a_helm_nor_go_the_python_commands_are_linked_and_make_install_succeeds(tmp_path, checkout_venv,
                                                                                            helm):
    proc = make_install(tmp_path, checkout_venv, helm=helm)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"jaxgen and jax-trainer are in {tmp_path / 'bin'}" in proc.stderr
    assert f"helm is not in {tmp_path / 'bin'}: Go builds the tested {TESTED} (https://go.dev/doc/install" \
        in proc.stderr, proc.stderr
    if helm:
        assert f"not Helm {TESTED.split('.')[0]} or newer" in proc.stderr, proc.stderr
    assert linked(tmp_path) == ["jax-trainer", "jaxgen"]
    assert os.path.realpath(tmp_path / "bin" / "jaxgen") == str(checkout_venv / "bin" / "jaxgen")


def test_without_a_helm_on_path_the_tested_one_is_built_once_saying_how_long_then_linked(tmp_path, checkout_venv):
    proc = make_install(tmp_path, checkout_venv, go=True)
    assert proc.returncode == 0, proc.stderr
    assert f"building helm {TESTED} with Go, once: about 10 minutes" in proc.stderr, proc.stderr
    assert linked(tmp_path) == ["helm", "jax-trainer", "jaxgen"]
    helm = subprocess.run([tmp_path / "bin" / "helm", "version", "--short"], capture_output=True, text=True)
    assert helm.stdout.strip() == TESTED
    (tmp_path / "fake" / "go").unlink()
    again = make_install(tmp_path, checkout_venv)  # built already: no Go needed, nothing built
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr
    assert (tmp_path / "go-calls").read_text().count("go install") == 1
    assert f"helm {TESTED} is in {tmp_path / 'bin'}" in again.stderr
