"""Helm keeps each release in a Secret: data["release"] is base64 of the gzip (best compression) of the
release's JSON (helm's pkg/storage/driver: encodeRelease), and the API server refuses a Secret over
1 MiB of data. The archives a stock job or program.dir brings through --set-file are in that JSON twice
(the values and the rendered ConfigMap): the chart holds them to HELM_ARCHIVES_LIMIT together, which
keeps the largest release it renders under the limit, measured on the release real Helm makes."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys

import pytest

from generator import shipping
from tests.support.paths import CHART_DIR, REPO_ROOT

from .helm import helm, write_values

SECRET_LIMIT = 1024 * 1024  # Kubernetes' MaxSecretSize: the bytes of a Secret's data, all keys together
# Go's gzip and Python's differ by well under this share of the compressed size.
GZIP_SLACK = 0.02


def _install_dry_run(tmp_path, program_characters: int):
    """`helm install --dry-run=client -o json` of a stock job with program.dir: the release Helm would
    store. The program's archive is random bytes in base64 (incompressible: the worst case) of the size
    asked."""
    (tmp_path / "trainer.b64").write_text(shipping.encoded(shipping.trainer_archive()))
    random = base64.b64encode(os.urandom(program_characters)).decode()[:program_characters]
    (tmp_path / "program.b64").write_text(random)
    values = json.loads((REPO_ROOT / "variables" / "examples" / "jobset.json").read_text())
    values.update(image={"source": "stock"}, program={"dir": "my-program", "command": ["python", "train.py"]})
    path = write_values(tmp_path, "big", values)
    return helm("install", "big", str(CHART_DIR), "-f", str(path), "--dry-run=client", "-o", "json",
                "--kubeconfig", os.devnull, "--set-file", f"image.trainer_archive={tmp_path / 'trainer.b64'}",
                "--set-file", f"program.archive={tmp_path / 'program.b64'}")


def _secret_bytes(release_json: str) -> int:
    return len(base64.b64encode(gzip.compress(release_json.strip().encode(), compresslevel=9)))


def test_the_largest_archives_the_chart_takes_fit_a_helm_release_and_one_more_character_is_refused(tmp_path):
    trainer = len(shipping.encoded(shipping.trainer_archive()))
    at_limit = _install_dry_run(tmp_path, shipping.HELM_ARCHIVES_LIMIT - trainer)
    assert at_limit.returncode == 0, at_limit.stderr
    size = _secret_bytes(at_limit.stdout) * (1 + GZIP_SLACK)
    assert size <= SECRET_LIMIT, f"a release at the chart's limit takes {size:.0f} bytes of its Secret: lower it"
    # the limit is Helm's, not a guess far below it: twice the archives would not fit
    assert size >= 0.75 * SECRET_LIMIT, f"{size:.0f} bytes: the limit leaves a quarter of the Secret unused"

    over = _install_dry_run(tmp_path, shipping.HELM_ARCHIVES_LIMIT - trainer + 1)
    assert over.returncode == 1, over.stdout[-500:]
    [line] = over.stderr.strip().splitlines()
    assert (f"$.program.archive: the archives come to {shipping.HELM_ARCHIVES_LIMIT + 1} characters of base64, more "
            f"than the {shipping.HELM_ARCHIVES_LIMIT} a Helm release holds") in line, line


@pytest.mark.parametrize("size, refused", [(2000, False), (shipping.HELM_ARCHIVES_LIMIT * 3 // 4 + 1024, True)])
def test_the_archive_command_refuses_a_program_no_helm_release_holds(tmp_path, size, refused):
    """`python -m generator.shipping program DIR` (the Helm path's archive) refuses, in one line and exit 2, a
    folder that packs within jaxgen's 768 KiB but over what a Helm release holds."""
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(os.urandom(size))  # incompressible: packs to about its size
    done = subprocess.run([sys.executable, "-m", "generator.shipping", "program", str(folder)], capture_output=True,
                          text=True, timeout=60, cwd=REPO_ROOT, check=False)
    if not refused:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2, done.stdout[-300:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: $.program.dir: ") and (
        f"base64 characters, over the {shipping.HELM_ARCHIVES_LIMIT} that fit a Helm release") in line, line
    assert len(shipping.program_archive(str(folder))) <= shipping.PROGRAM_ARCHIVE_LIMIT  # jaxgen takes it
