"""A progress bar only when stdout is a terminal; plain `Rank i:` batch lines otherwise."""

import json
import os
import pty
import re
import subprocess
import time

import pytest

from tests.support.paths import REPO_ROOT
from trainer.metrics import Pace, format_duration
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
    # Each progress line: step/total, then the throughput and the time to go. The attempt's first chunk
    # is its first step alone (the compile, left out of the pace): the first line already has a pace.
    lines = [line for line in piped.stdout.splitlines() if ", batch " in line]
    assert [re.search(r"step (\d+)/32", line).group(1) for line in lines] == ["8", "16", "24", "32"], lines
    for line in lines:
        assert re.search(r", \d+ examples/s, ETA \d+:\d\d:\d\d$", line), line
    assert lines[-1].endswith("ETA 0:00:00")
    assert re.search(r"^Rank 0: first step \(step 1\) \d+\.\d s after the process started$", piped.stdout, re.M)
    metrics = next((tmp_path / "pipe").glob("*/metrics.jsonl"))
    records = [json.loads(r) for r in metrics.read_text().splitlines()]
    steps = [r for r in records if r["event"] == "step"]
    assert all(r["examples_per_second"] > 0 and r["eta_seconds"] >= 0 for r in steps)
    assert steps[-1]["eta_seconds"] == 0
    first = [r for r in records if r["event"] == "first_step"]
    assert len(first) == 1 and first[0]["step"] == 1 and 0 < first[0]["seconds_since_launch"] < 150, first


def test_pace_leaves_the_first_chunk_out_and_counts_down():
    clock = Clock()
    pace = Pace(100, 64, clock)
    assert (pace.remaining_seconds(), pace.describe()) == (None, "step 0/100, ETA unknown")
    clock.now = 30.0  # the first chunk: its compile time is not the pace
    pace.stepped(10)
    assert pace.remaining_seconds() is None
    clock.now = 32.0
    pace.stepped(20)  # 10 steps in 2 s
    assert pace.remaining_seconds() == 16.0
    assert pace.describe() == "step 20/100, 320 examples/s, ETA 0:00:16"
    assert pace.record() == {"examples_per_second": 320.0, "eta_seconds": 16.0}
    pace.stepped(100)
    assert pace.remaining_seconds() == 0.0
    assert format_duration(3725.4) == "1:02:05"


class Clock:
    now = 0.0

    def __call__(self):
        return self.now
