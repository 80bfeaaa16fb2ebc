"""Goodput from real runs (trainer/goodput.py, docs/goodput.md): 2 processes on 127.0.0.1 are killed
after step 47 (SIGKILL; the checkpoint of step 40 on disk, step 47 recorded), and after a pause the job
is started again and resumes from step 40. The summary's account shows the 7 steps redone, the
restore, the pause as recovery, and its parts add up to the wall time.

The account's arithmetic on hand-made records (steps that speed up, saves, evaluation, a restart) is
in test_goodput_account.py."""

import json
import signal
import time

import pytest

from tests.support.procs import free_port, outputs_of, small_train_args, start, trainer_argv, wait_all
from trainer import exit_codes, goodput
from trainer.outputs import METRICS, SUMMARY
from trainer.results import read_records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ARGS = ["--epochs", "3", "--log-every", "5", "--checkpoint-every", "20", "--metrics-port", "0"]
PAUSE = 3.0


def run_job(tmp_path, name, extra_for_rank):
    port = free_port()
    procs = []
    for rank in range(2):
        env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}
        argv = trainer_argv(*small_train_args(tmp_path / "c", *ARGS, *extra_for_rank(rank)))
        procs.append(start(argv, tmp_path / f"{name}-rank{rank}.log", env))
    return procs, wait_all(procs, 240)


def test_a_restarted_run_accounts_for_redone_steps_restore_and_recovery(tmp_path):
    # Every process gets the hook: it ends a chunk of steps there, and the processes' chunks must agree.
    procs, codes = run_job(tmp_path, "first", lambda rank: ["--fault-after-step", "47"])
    # Rank 1 kills itself after step 47 too, unless it sees its coordinator (rank 0) gone a moment before
    # (a busy machine): then it ends as a lost peer. The attempt ends after step 47 either way.
    killed = 128 + signal.SIGKILL
    assert codes[0] == killed and codes[1] in (killed, exit_codes.PEER_LOST), (codes, procs[1].output[-3000:])
    assert "Rank 0: fault injection: killing this process after step 47" in procs[0].output
    time.sleep(PAUSE)
    procs, codes = run_job(tmp_path, "second", lambda rank: [])
    assert codes == [0, 0], procs[0].output[-3000:]
    assert "resuming from the checkpoint of step 40" in procs[0].output

    directory = outputs_of(tmp_path / "c")
    summary = json.loads((directory / SUMMARY).read_text())
    account = summary["goodput"]
    assert account == goodput.account(read_records(directory / METRICS))
    lost = account["badput_seconds"]
    print(json.dumps(account, indent=1))
    assert set(lost) == set(goodput.BADPUT)
    assert account["steps_redone"] == 7  # steps 41-47, recorded before the failure, trained again
    steps = [r for r in read_records(directory / METRICS) if r.get("event") == "step"]
    steps = steps[: next(i for i, r in enumerate(steps) if r["step"] == 47) + 1]  # the first attempt's
    before = [r for r in steps if r["step"] <= 40][-1]  # the record before the steps redone
    assert 0 < lost["wasted_progress_from_disruption"] <= steps[-1]["time"] - before["time"] + 1e-3
    assert lost["unproductive_checkpoint_restore_time"] > 0
    assert lost["infrastructure_recovery_from_disruption"] >= PAUSE - 0.02  # process starts are known to 10 ms
    for phase in ("program_startup", "accelerator_initialization", "training_prep", "evaluation"):
        assert lost[phase] > 0, phase
    assert account["productive_seconds"] > 0
    parts = account["productive_seconds"] + sum(lost.values())
    assert parts == pytest.approx(account["wall_seconds"], abs=0.01)  # 12 figures rounded to 1 ms
    assert 0 < account["goodput"] < 1
