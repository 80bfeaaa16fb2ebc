"""Honest image names: scripts/prepare.sh warns when a render's pods may run another build than the
one named (a tag that moves, pulled IfNotPresent), and says nothing once the build is pinned (a
digest, a commit tag of scripts/image.sh) or pulled Always."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.paths import REPO_ROOT

PREPARE = REPO_ROOT / "scripts" / "prepare.sh"
WARNING = "is a tag that may move, pulled IfNotPresent"


@pytest.mark.parametrize("sets, warned", [
    ([], True),  # image.sh's <version>-<variant>
    (["image.source=stock"], True),  # python:3.11.14-slim-bookworm
    (["image.tag=0.1.0-0123456789ab-cpu"], False),  # a commit tag
    (["image.tag=0.1.0-0123456789ab-dirty0a1b2c3d-cpu"], False),
    (["image.digest=sha256:" + "a" * 64], False),
    (["image.pull_policy=Always"], False),
    (["image.tag=latest"], False),  # Kubernetes pulls latest Always
])
def test_prepare_warns_of_a_moving_tag_pulled_if_not_present(tmp_path, sets, warned):
    args = ["bash", str(PREPARE), "-n", "default", "-o", str(tmp_path / "build")]
    for assignment in sets:
        args += ["--set", assignment]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if WARNING in line]
    assert len(lines) == (1 if warned else 0), proc.stderr
    if warned:
        assert lines[0].startswith("warning: image ") and "image.digest" in lines[0]
        # a commit tag is what scripts/image.sh gives this project's builds, which a stock image is not
        assert ("commit tag" in lines[0]) == ("image.source=stock" not in sets), lines[0]
