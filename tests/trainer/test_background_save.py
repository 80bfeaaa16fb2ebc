"""A process killed in the middle of a background checkpoint write: the previous checkpoint is intact,
the half-written file is never loaded, and the rerun resumes from the previous one to the bits of an
uninterrupted run."""

import numpy as np
import pytest

from tests.support.procs import (checkpoints_of, kill, latest_checkpoint, run_cluster, small_train_args, start,
                                 trainer_argv, wait_for_text)
from trainer import checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ARGS = ["--checkpoint-every", "8"]


def test_a_kill_during_a_background_write_keeps_the_previous_checkpoint(tmp_path):
    killed = tmp_path / "killed"
    proc = start(trainer_argv(*small_train_args(killed, *ARGS, "--stall-save-at-step", "16")), tmp_path / "killed.log")
    try:
        wait_for_text(proc, "Rank 0: fault injection: the checkpoint write of step 16 stops before its rename", 180)
        # The step loop went on while that write was held (until the next save waits for it).
        wait_for_text(proc, "Rank 0: epoch 1/1, batch 24/32", 60)
    finally:
        kill(proc)  # SIGKILL, as the OOM killer or a lost node would
    directory = checkpoints_of(killed)
    assert checkpoint.list_steps(directory) == [8]
    assert [p.name for p in directory.glob(f"{checkpoint.TEMP_PREFIX}*")], "no half-written file: not killed mid-write"
    meta, _ = checkpoint.read(latest_checkpoint(killed))
    assert meta["step"] == 8

    resumed = run_cluster(tmp_path, "resumed", lambda r: trainer_argv(*small_train_args(killed, *ARGS)), 1, 1, 180)
    assert "Rank 0: resuming from the checkpoint of step 8" in resumed[0].output
    assert "checkpoint saved at step 16: " in resumed[0].output
    assert not list(directory.glob(f"{checkpoint.TEMP_PREFIX}*"))  # the next save removed it
    run_cluster(tmp_path, "straight", lambda r: trainer_argv(*small_train_args(tmp_path / "straight", *ARGS)), 1, 1, 180)
    a = checkpoint.read(latest_checkpoint(tmp_path / "straight"))
    b = checkpoint.read(latest_checkpoint(killed))
    assert a[0]["step"] == b[0]["step"] == 32
    for key in a[1]:
        np.testing.assert_array_equal(a[1][key], b[1][key], err_msg=key)
