"""The trainer image definition: non-root, both variants present (its pins: test_versions.py)."""

import re

from generator.engines.kubernetes.policy import RUN_AS_ID
from tests.support.paths import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "trainer" / "Dockerfile").read_text()


def arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE, re.M)
    assert match, f"ARG {name} missing"
    return match.group(1)


def test_the_default_base_is_the_tests_python():
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", arg("PYTHON_IMAGE"))  # jax 0.10 is the last for 3.11


def test_gpu_by_default_cpu_by_build_arg():
    assert arg("JAX_VARIANT") == "cuda12"
    assert 'cuda12) jax_req="jax[cuda12]"' in DOCKERFILE
    assert 'cpu)    jax_req="jax jaxlib"' in DOCKERFILE


def test_runs_as_the_manifests_non_root_user():
    """The uid is a build argument with no default: scripts/image.sh passes its one home's value
    (scripts/lib/contract.sh, generated from the Kubernetes policy), and a build without it fails."""
    assert re.search(r"^ARG RUN_AS_ID$", DOCKERFILE, re.M)
    assert str(RUN_AS_ID) not in DOCKERFILE and RUN_AS_ID >= 10000
    assert 'echo "build argument RUN_AS_ID (a uid) is required" >&2; exit 1' in DOCKERFILE
    image_sh = (REPO_ROOT / "scripts" / "image.sh").read_text()
    assert 'source "$JAXT_ROOT/scripts/lib/contract.sh"' in image_sh and '--build-arg "RUN_AS_ID=$RUN_AS_ID"' in image_sh
    assert f"RUN_AS_ID={RUN_AS_ID}\n" in (REPO_ROOT / "scripts" / "lib" / "contract.sh").read_text()
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    assert users == ["${RUN_AS_ID}:${RUN_AS_ID}"]
    assert DOCKERFILE.index("USER ${RUN_AS_ID}") > DOCKERFILE.index("pip install")  # nothing installed as the user
    assert 'useradd --uid "${RUN_AS_ID}" --gid "${RUN_AS_ID}"' in DOCKERFILE


def test_packages_go_into_a_virtualenv_first_on_path():
    """Debian's python3 refuses a system-wide pip install (PEP 668) and has no `python` command,
    which the manifests run: both bases work with a venv first on PATH."""
    assert "python3 -m venv /opt/venv" in DOCKERFILE
    assert re.search(r"^\s*PATH=/opt/venv/bin:\$PATH", DOCKERFILE, re.M)
    assert DOCKERFILE.index("python3 -m venv") < DOCKERFILE.index("pip install")


def test_build_ca_trust_is_a_secret_not_a_layer():
    """A TLS-intercepting proxy's CA reaches pip as a build secret, never copied into the image."""
    assert "--mount=type=secret,id=pip-ca" in DOCKERFILE
    assert not re.search(r"^(COPY|ADD)\b.*\.(crt|pem)", DOCKERFILE, re.M)
    assert "update-ca-certificates" not in DOCKERFILE
