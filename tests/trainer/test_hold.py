"""The hidden --hold-after-step hook (trainer/faults.py) that the node-loss round starts its jobs with:
every job waits at the same step until the round releases it, so none has ended when the fault comes."""

from __future__ import annotations

import signal
import time

import pytest

from tests.support import procs
from trainer import checkpoint
from trainer.exit_codes import PREEMPTED
from trainer.faults import HOLD_RELEASED
from trainer.results import read_records


def steps(outputs) -> list[int]:
    return [r["step"] for r in read_records(outputs / "metrics.jsonl") if r.get("event") == "step"]


def held_run(tmp_path) -> procs.Proc:
    """A small run with a checkpoint every 8 steps, held after step 8."""
    return procs.start(procs.trainer_argv(*procs.small_train_args(tmp_path, "--checkpoint-every", "8",
                                                                  "--hold-after-step", "8")), tmp_path / "run.log")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_held_run_waits_after_its_step_until_released_then_finishes(tmp_path):
    proc = held_run(tmp_path)
    outputs = procs.outputs_of(tmp_path)
    try:
        procs.wait_for_text(proc, f"hold injection: waiting after step 8 for {outputs / HOLD_RELEASED}", 150)
        assert checkpoint.list_steps(procs.checkpoints_of(tmp_path)) == [8]  # on disk before the hold
        held_until = time.monotonic() + 3  # held: alive, and no step past 8 while the file is missing
        while time.monotonic() < held_until:
            assert proc.popen.poll() is None and steps(outputs) == [8], (steps(outputs), proc.output[-2000:])
            time.sleep(0.2)
        (outputs / HOLD_RELEASED).touch()
        assert procs.wait_all([proc], 120) == [0], proc.output[-3000:]
    finally:
        procs.kill(proc)
    assert steps(outputs) == [8, 16, 24, 32], proc.output[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_stop_signal_ends_the_hold_and_the_run_stops_as_preempted(tmp_path):
    """A held process stopped with SIGTERM (its pod deleted) saves and exits at once, as when training,
    not when the hold runs out (HOLD_SECONDS)."""
    proc = held_run(tmp_path)
    try:
        procs.wait_for_text(proc, "hold injection: waiting after step 8", 150)
        proc.popen.send_signal(signal.SIGTERM)
        assert procs.wait_all([proc], 60) == [PREEMPTED], proc.output[-3000:]
    finally:
        procs.kill(proc)
    assert steps(procs.outputs_of(tmp_path)) == [8], proc.output[-2000:]
