"""trainer/constraints.txt is the one home of the trainer's pinned versions: pyproject.toml declares the
range they fall in, the image and scripts/setup.sh install with the file, and no other file pins them."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.support.constraints import pinned, pins
from tests.support.paths import REPO_ROOT
from trainer import versions


# The extras the image installs: the trainer's, and its bucket client (outputs.uri).
IMAGE_EXTRAS = ("trainer", "s3")


def declared() -> dict[str, Requirement]:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {Requirement(r).name: Requirement(r) for extra in IMAGE_EXTRAS for r in extras[extra]}


def test_this_python_runs_the_pinned_versions():
    """The tests run what the image installs on the same Python (markers choose the JAX line)."""
    here = [r for r in pins() if r.marker is None or r.marker.evaluate()]
    assert {r.name for r in here} == set(declared())
    for requirement in here:
        assert version(requirement.name) == pinned(requirement), requirement


def test_the_declared_range_admits_every_pin():
    """pyproject.toml's trainer (and s3) extra is the supported range: it holds each JAX line pinned here."""
    ranges = declared()
    assert {r.name for r in pins()} == set(ranges)
    for requirement in pins():
        assert ranges[requirement.name].specifier.contains(pinned(requirement)), (requirement, ranges[requirement.name])
    jax_lines = {pinned(r) for r in pins() if r.name == "jax"}
    assert len(jax_lines) >= 2 and {v.split(".")[1] for v in jax_lines} >= {"10", "12"}, jax_lines


def test_pip_and_the_trainers_start_up_check_have_one_range_of_jax():
    """trainer/versions.py is the range's home: pyproject.toml states it for pip, the same."""
    ranges = declared()
    assert {name: str(ranges[name].specifier) for name in versions.PACKAGES} == {
        name: str(SpecifierSet(versions.supported())) for name in versions.PACKAGES}
    for requirement in pins():
        if requirement.name in versions.PACKAGES:
            assert versions.in_range(pinned(requirement)), requirement


# Files that install Python packages or describe how; none of them may pin a version of its own.
INSTALLERS = [REPO_ROOT / "pyproject.toml", REPO_ROOT / "trainer" / "Dockerfile", REPO_ROOT / "Makefile",
              *(REPO_ROOT / "scripts").rglob("*.sh"), *(REPO_ROOT / "scripts").rglob("*.py"),
              *(REPO_ROOT / "trainer").rglob("*.py"), *(REPO_ROOT / "generator").rglob("*.py"),
              *(REPO_ROOT / "docs").rglob("*.md"), *REPO_ROOT.glob("*.md"), *(REPO_ROOT / "trainer").glob("*.md")]


def restatements(text: str) -> list[str]:
    names = "|".join(re.escape(r.name) for r in pins())
    versions = "|".join(re.escape(pinned(r)) for r in pins())
    pattern = re.compile(rf"(?i)\b({names})(\[[\w,]+\])?\s*==|^\s*(ARG|ENV)\s+\w*_VERSION\s*=\s*({versions})\b", re.M)
    return [m.group(0) for m in pattern.finditer(text)]


@pytest.mark.parametrize("planted", ['"jax==0.12.0.1",', "ARG JAX_VERSION=0.10.2",
                                     'pip install "jax[cuda12]==0.10.2"', "ARG NUMPY_VERSION=2.4.6"])
def test_the_scan_finds_a_planted_pin(planted):
    assert restatements(f"before\n{planted}\nafter\n"), planted


def test_no_other_file_pins_a_version():
    found = [f"{path.relative_to(REPO_ROOT)}: {hit}" for path in INSTALLERS if path.is_file()
             for hit in restatements(path.read_text())]
    assert not found, f"pinned outside trainer/constraints.txt: {found}"


def test_the_image_and_the_venv_install_with_the_constraints():
    dockerfile = (REPO_ROOT / "trainer" / "Dockerfile").read_text()
    assert "COPY trainer/constraints.txt /opt/jax-training/constraints.txt" in dockerfile
    assert re.search(r"pip install --constraint /opt/jax-training/constraints\.txt \$\{jax_req\}", dockerfile)
    setup = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    assert 'CONSTRAINTS="$JAXT_ROOT/trainer/constraints.txt"' in setup
    assert setup.count('-c "$CONSTRAINTS"') == 2  # the venv and the wheelhouse
