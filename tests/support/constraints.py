"""trainer/constraints.txt, the trainer's pinned versions, read as requirements."""

from __future__ import annotations

from packaging.requirements import Requirement

from tests.support.paths import REPO_ROOT

CONSTRAINTS = REPO_ROOT / "trainer" / "constraints.txt"


def pins() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in CONSTRAINTS.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def pinned(requirement: Requirement) -> str:
    """The version a `name==version` line pins."""
    [spec] = requirement.specifier
    assert spec.operator == "==", requirement
    return spec.version


def pinned_for(name: str, python_version: str) -> str:
    """The version of `name` pinned for that Python (markers choose the JAX line)."""
    [found] = [r for r in pins()
               if r.name == name and (r.marker is None or r.marker.evaluate({"python_version": python_version}))]
    return pinned(found)
