"""The trainer's command line with hostile values: each is one `Rank 0: error:` line (or argparse's
usage line) and the exit code of trainer/exit_codes.py for its kind, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from trainer import exit_codes

CASES = [
    (["--learning-rate", "inf"], exit_codes.CONFIG, "--learning-rate inf must be a finite number > 0"),
    (["--learning-rate", "nan"], exit_codes.CONFIG, "--learning-rate nan must be a finite number > 0"),
    (["--momentum", "nan"], exit_codes.CONFIG, "--momentum nan must be in [0, 1)"),
    (["--hang-timeout", "inf"], exit_codes.CONFIG, "argument --hang-timeout: invalid"),
    (["--mlp-hidden-sizes", ","], exit_codes.CONFIG, "argument --mlp-hidden-sizes"),
    (["--run-name", ".."], exit_codes.CONFIG, "--run-name '..' must name one directory"),
    (["--checkpoint-dir", "/dev/null"], exit_codes.CHECKPOINT, "--checkpoint-dir /dev/null: not a directory"),
    (["--data-dir", "/dev/null"], exit_codes.DATA, "/dev/null: the data directory is not a directory"),
]


@pytest.mark.parametrize("args,code,message", CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_hostile_flag_is_one_line_and_its_exit_code(tmp_path, args, code, message):
    argv = [sys.executable, "-m", "trainer", "train", "--data-dir", str(tmp_path / "none"), "--no-download",
            "--checkpoint-dir", str(tmp_path / "ckpt"), *args]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert message in output.strip().splitlines()[-1], output
    assert "Traceback" not in output
