"""A progress bar only when stdout is a terminal; plain `Rank i:` batch lines otherwise."""

import os
import pty
import subprocess
import time

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.procs import small_train_args, trainer_argv


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_progress_bar_on_a_tty_and_log_lines_otherwise(tmp_path):
    argv = trainer_argv(*small_train_args(tmp_path / "tty"))
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 150
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=30) == 0
    tty_output = b"".join(chunks).decode(errors="replace")
    assert "epoch 1/1: " in tty_output and "it/s" in tty_output  # tqdm's bar
    assert "batch 8/32" not in tty_output
    assert "Rank 0: training completed." in tty_output

    piped = subprocess.run(trainer_argv(*small_train_args(tmp_path / "pipe")), cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=150)
    assert piped.returncode == 0
    assert "Rank 0: epoch 1/1, batch 8/32, loss=" in piped.stdout and "it/s" not in piped.stdout + piped.stderr
