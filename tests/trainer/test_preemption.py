"""Stop signals, the hang watchdog and clear ends, with real processes (2 processes x 1 CPU device).

A stop signal reaches one process; every process must stop after the same step, the checkpoint
of that step must exist, the exit code must be 143, and a rerun must end with the bits of an
uninterrupted run. Signals are sent by the test itself: the trainer sets its own dispositions, so
an inherited SIG_IGN (a backgrounded CI shell) cannot hide them.
"""

import re
import signal

import numpy as np
import pytest

from tests.support.procs import (checkpoints_of, latest_checkpoint, free_port, kill, outputs_of, run_cluster,
                                 small_train_args, start, trainer_argv, wait_all, wait_for_text)
from trainer import checkpoint, exit_codes
from trainer.data import DECODED_DATA_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ARGS = ["--epochs", "40", "--init-timeout", "60"]


def cluster_env(port: int, rank: int, processes: int = 2) -> dict:
    return {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(processes),
            "JAX_PROCESS_ID": str(rank)}


def start_pair(tmp_path, name, ckpt, *extra, rank_extra=None, env=None):
    port = free_port()
    return [start(trainer_argv(*small_train_args(ckpt, *ARGS, *extra, *((rank_extra or {}).get(rank, [])))),
                  tmp_path / f"{name}-rank{rank}.log", {**cluster_env(port, rank), **(env or {})}) for rank in range(2)]


DEFAULT_DECODED_DATA = {DECODED_DATA_ENV: None}  # the default: the copies in the job's outputs


def params(directory) -> dict:
    return {k: v for k, v in checkpoint.read(latest_checkpoint(directory))[1].items() if k.startswith("[0]")}


def cache_use(output: str, rank: int) -> tuple[int, int]:
    """(programs read from the compilation cache, programs compiled) of the run's end line."""
    found = re.findall(rf"Rank {rank}: compilation cache: (\d+) programs read, (\d+) compiled, \d+ written", output)
    assert len(found) == 1, output[-3000:]
    return tuple(map(int, found[0]))


def stop_step(output: str) -> int:
    found = re.findall(r"every process stops after step (\d+)", output)
    assert len(found) == 1, output[-3000:]
    return int(found[0])


def test_sigterm_to_one_process_stops_all_at_one_step_and_the_rerun_matches_an_uninterrupted_run(tmp_path):
    stopped_dir = tmp_path / "stopped"
    procs = start_pair(tmp_path, "stopped", stopped_dir, env=DEFAULT_DECODED_DATA)
    try:
        wait_for_text(procs[0], "epoch 2/40, batch 8/32", 180)
        procs[1].popen.send_signal(signal.SIGTERM)
        codes = wait_all(procs, 120)
    finally:
        for proc in procs:
            kill(proc)
    assert codes == [exit_codes.PREEMPTED] * 2, [p.output[-2000:] for p in procs]
    assert "Rank 1: received SIGTERM: stopping after the current chunk of steps" in procs[1].output
    assert "a peer received a stop signal" in procs[0].output
    step = stop_step(procs[0].output)
    assert step == stop_step(procs[1].output)
    assert 40 <= step < 40 * 32
    assert checkpoint.list_steps(checkpoints_of(stopped_dir))[-1] == step
    assert re.search(rf"Rank 0: checkpoint saved at step {step}: \S+ \(\d+\.\d+ s\)", procs[0].output)

    assert len(list((outputs_of(stopped_dir) / "decoded-data").glob("*.npy"))) == 4  # the restart maps them
    resumed = run_cluster(tmp_path, "resumed", lambda r: trainer_argv(*small_train_args(stopped_dir, *ARGS)), 2, 1, 240,
                          DEFAULT_DECODED_DATA)
    assert f"resuming from the checkpoint of step {step}" in resumed[1].output
    # the attempt's first step is a chunk of its own (the restart's cost in the log), and the bits stay the same
    assert f"Rank 0: first step (step {step + 1}) " in resumed[0].output, resumed[0].output[-3000:]
    # The restart reads the programs of every process's devices that the first run compiled (process 0
    # wrote them) on every process (the steps, the state and data put on the devices), and the bits
    # below are those of a run that compiled its own. A program of one process's own device alone is
    # compiled again by the others (its key names the device).
    use = [cache_use(proc.output, rank) for rank, proc in enumerate(resumed)]
    assert all(read >= 3 for read, _ in use), use
    run_cluster(tmp_path, "straight", lambda r: trainer_argv(*small_train_args(tmp_path / "straight", *ARGS)), 2, 1, 240)
    a, b = params(tmp_path / "straight"), params(stopped_dir)
    assert checkpoint.list_steps(checkpoints_of(stopped_dir))[-1] == checkpoint.list_steps(checkpoints_of(tmp_path / "straight"))[-1] == 40 * 32
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("sig,code,said", [
    (signal.SIGUSR1, exit_codes.PREEMPTED, "exiting with 143 (preempted"),
    (signal.SIGINT, exit_codes.INTERRUPTED, "exiting with 130 (interrupted"),  # Ctrl-C, as SIGTERM, but 130
], ids=["sigusr1", "ctrl-c"])
def test_a_stop_signal_stops_a_single_process_with_a_checkpoint(tmp_path, sig, code, said):
    # long enough to be still training when the signal comes, however fast the machine
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", *ARGS, "--epochs", "2000")), tmp_path / "one.log")
    try:
        wait_for_text(proc, "epoch 2/2000", 120)
        proc.popen.send_signal(sig)
        codes = wait_all([proc], 60)
    finally:
        kill(proc)
    assert codes == [code], proc.output[-2000:]
    assert "Traceback" not in proc.output and "KeyboardInterrupt" not in proc.output
    step = stop_step(proc.output)
    assert f"preempted (received {sig.name})" in proc.output and said in proc.output
    assert checkpoint.list_steps(checkpoints_of(tmp_path / "c"))[-1] == step


@pytest.mark.parametrize("delay", [0.5, 2.0, 5.0])
def test_ctrl_c_at_any_moment_of_the_start_is_exit_130_without_a_traceback(tmp_path, delay):
    import time

    # long enough to be still training at the last delay, however fast the machine
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--epochs", "2000", "--init-timeout", "60")),
                 tmp_path / "one.log")
    try:
        time.sleep(delay)
        proc.popen.send_signal(signal.SIGINT)
        codes = wait_all([proc], 60)
    finally:
        kill(proc)
    assert codes == [exit_codes.INTERRUPTED] and "Traceback" not in proc.output, proc.output[-2000:]


def test_hang_is_dumped_and_exits_with_the_hang_code_on_every_process(tmp_path):
    procs = start_pair(tmp_path, "hang", tmp_path / "c", "--hang-timeout", "5",
                       rank_extra={1: ["--hang-after-step", "40"]})
    codes = wait_all(procs, 180)
    # The hung process ends with the hang code. Its peer, stuck in the same collective, does too when
    # its own watchdog fires first; when the hung one's fires first (a poll apart), the peer sees it
    # gone and ends as a lost peer, which the failure policy does not count (counted once, on the hang).
    assert codes[1] == exit_codes.HANG and codes[0] in (exit_codes.HANG, exit_codes.PEER_LOST), \
        [p.output[-3000:] for p in procs]
    assert "Rank 1: hang injection: this process stops making progress after step 40" in procs[1].output
    for proc, code in zip(procs, codes):
        if code == exit_codes.HANG:
            assert re.search(r"hang: no training step completed for \d+ s \(hang timeout 5 s", proc.output)
            assert "Thread 0x" in proc.output and "most recent call first" in proc.output  # faulthandler's dump
        else:
            assert "error: a collective failed, a peer process died or became unreachable" in proc.output
    assert "in _hang_forever" in procs[1].output


def test_coordinator_whose_peers_never_join_exits_with_one_clear_line(tmp_path):
    port = free_port()
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--init-timeout", "5")), tmp_path / "rank0.log",
                 cluster_env(port, 0))
    assert wait_all([proc], 90) == [exit_codes.COORDINATOR], proc.output[-3000:]
    assert (f"error: the 2 processes did not all join the coordinator 127.0.0.1:{port} within the init timeout "
            "of 5 s (process 0 waited for its peers)") in proc.output
    assert "Check failure" not in proc.output and "Traceback" not in proc.output
