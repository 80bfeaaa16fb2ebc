"""Real multi-process JAX on 127.0.0.1: equivalence of layouts, resume, failures, device queries.

Every test runs under a hard timeout and kills its process groups on failure.
"""

import signal
import time

import numpy as np
import pytest

from tests.support.paths import MNIST_DIR
from tests.support.procs import (checkpoints_of, latest_checkpoint, free_port, kill, outputs_of, run_cluster, small_train_args, start,
                                 trainer_argv, wait_all, wait_for_text)
from trainer import checkpoint, exit_codes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def final_params(directory) -> dict[str, np.ndarray]:
    meta, leaves = checkpoint.read(latest_checkpoint(directory))
    return meta, {name: value for name, value in leaves.items() if name.startswith("[0]")}


def max_relative_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.max(np.abs(a[k] - b[k])) / max(np.max(np.abs(a[k])), 1e-12)) for k in a)


LAYOUTS = [  # (name, processes, local devices, extra args)
    ("pmap-1x1", 1, 1, []),
    ("pmap-1x2", 1, 2, []),
    ("pmap-2x1", 2, 1, []),
    ("pmap-2x2", 2, 2, []),  # several local CPU devices per process: each step must be blocked on
    ("sharded-1x2", 1, 2, ["--strategy", "sharded"]),
    ("sharded-2x1", 2, 1, ["--strategy", "sharded"]),
    ("sharded-model2", 1, 2, ["--strategy", "sharded", "--model-parallelism", "2"]),
    ("sharded-2x2-model2", 2, 2, ["--strategy", "sharded", "--model-parallelism", "2"]),
]


def test_layouts_and_strategies_compute_the_same_parameters(tmp_path):
    results = {}
    for name, processes, devices, extra in LAYOUTS:
        ckpt = tmp_path / name
        run_cluster(tmp_path, name, lambda rank: trainer_argv(*small_train_args(ckpt, *extra)), processes, devices, 240)
        meta, results[name] = final_params(ckpt)
        assert meta["step"] == 32
    reference = results["pmap-1x1"]
    moved = max_relative_difference(reference, {k: v * 0 for k, v in reference.items()})
    assert moved == 1.0  # sanity: the comparison would see a difference
    report = {name: max_relative_difference(reference, params) for name, params in results.items()}
    print("max relative difference to pmap 1x1:", report)
    assert all(diff <= 1e-5 for diff in report.values()), report


def test_killed_run_resumes_to_the_same_parameters(tmp_path):
    args = ["--epochs", "3", "--checkpoint-every", "10"]
    run_cluster(tmp_path, "straight", lambda r: trainer_argv(*small_train_args(tmp_path / "straight", *args)), 1, 1, 180)

    crashed = start(trainer_argv(*small_train_args(tmp_path / "crash", *args, "--fault-after-step", "45")),
                    tmp_path / "crash-1.log")
    assert wait_all([crashed], 180) == [-signal.SIGKILL]
    assert checkpoint.list_steps(checkpoints_of(tmp_path / "crash")) == [30, 40]  # killed at 45, after the checkpoint of 40
    procs = run_cluster(tmp_path, "resume", lambda r: trainer_argv(*small_train_args(tmp_path / "crash", *args)), 1, 1, 180)
    assert "resuming from the checkpoint of step 40" in procs[0].output

    (meta_a, a), (meta_b, b) = final_params(tmp_path / "straight"), final_params(tmp_path / "crash")
    assert meta_a["step"] == meta_b["step"] == 96
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_checkpoint_of_another_configuration_is_refused(tmp_path):
    run_cluster(tmp_path, "first", lambda r: trainer_argv(*small_train_args(tmp_path / "c")), 1, 1, 120)
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--learning-rate", "0.5", "--epochs", "2")), tmp_path / "second.log")
    assert wait_all([proc], 120) == [exit_codes.CHECKPOINT]
    assert (f"Rank 0: error: {outputs_of(tmp_path / 'c')} holds the outputs of job 'jax-training' (started "
            in proc.output)
    assert "with other settings (epochs 1 there, 2 now; learning_rate 0.1 there, 0.5 now)" in proc.output
    # The fix, as flags and as the variables a rendered job's flags come from.
    assert ("choose another --run-name or --checkpoint-dir (variables: name, checkpoint.dir), or the original "
            "settings") in proc.output
    assert proc.output.count("error:") == 1 and "Traceback" not in proc.output


def test_unusable_checkpoint_dir_fails_at_start_naming_the_flag(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    proc = start(trainer_argv(*small_train_args(tmp_path / "a-file" / "c")), tmp_path / "train.log")
    assert wait_all([proc], 60) == [exit_codes.CHECKPOINT]
    assert f"--checkpoint-dir {tmp_path / 'a-file' / 'c'}: cannot write checkpoints there" in proc.output
    assert "Traceback" not in proc.output


def test_gpu_platform_without_a_gpu_is_one_line(tmp_path):
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--platform", "gpu")), tmp_path / "train.log",
                 {"CUDA_VISIBLE_DEVICES": ""})
    assert wait_all([proc], 120) == [exit_codes.DEVICE_COUNT]
    assert "--platform gpu: no usable GPU backend" in proc.output and "Traceback" not in proc.output


def test_coordinator_that_never_comes_up_fails_within_the_init_timeout(tmp_path):
    port = free_port()  # nothing listens there
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--init-timeout", "5")), tmp_path / "follower.log", env)
    assert wait_all([proc], 120) == [4]
    elapsed = time.monotonic() - proc.started
    assert f"coordinator 127.0.0.1:{port} did not come up within the init timeout of 5 s" in proc.output
    # 5 s of waiting plus interpreter and data start-up, which a loaded machine stretches to tens of
    # seconds; JAX's own init timeout (minutes) would be far longer
    assert elapsed < 5 + 55, elapsed


@pytest.mark.parametrize("victim", [1, 0])
def test_peer_killed_mid_training_is_reported_by_the_survivor_who_exits_promptly(tmp_path, victim):
    port, heartbeat = free_port(), 5
    procs = []
    for rank in range(2):
        env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}
        args = ["train", "--data-dir", str(MNIST_DIR), "--no-download", "--mlp-hidden-sizes", "256,256",
                "--epochs", "50", "--log-every", "5", "--heartbeat-timeout", str(heartbeat), "--init-timeout", "60"]
        procs.append(start(trainer_argv(*args), tmp_path / f"rank{rank}.log", env))
    try:
        wait_for_text(procs[0], "batch 10/", 120)  # process 0 logs the progress
        kill(procs[victim])
        killed_at = time.monotonic()
        survivor = procs[1 - victim]
        codes = wait_all([survivor], heartbeat + 20)
        elapsed = time.monotonic() - killed_at
    finally:
        for proc in procs:
            kill(proc)
    assert codes[0] == exit_codes.PEER_LOST, survivor.output[-2000:]
    assert f"Rank {1 - victim}: error: a collective failed, a peer process died or became unreachable" in survivor.output
    assert "training completed" not in survivor.output
    assert elapsed <= heartbeat + 15, elapsed
    print(f"victim {victim}: survivor exited {codes[0]} after {elapsed:.1f} s")


@pytest.mark.parametrize("command", ["query", "allreduce"])
def test_query_and_allreduce_with_two_processes_of_two_devices(tmp_path, command):
    procs = run_cluster(tmp_path, command, lambda rank: trainer_argv(command, "--init-timeout", "60"), 2, 2, 120)
    for rank, proc in enumerate(procs):
        assert f"Rank {rank}: process {rank}/2: local devices 2" in proc.output
        assert "global devices 4" in proc.output
        if command == "allreduce":
            assert f"Rank {rank}: psum of ones = 4 (expected 4)" in proc.output


def test_allreduce_with_three_local_devices_in_one_process(tmp_path):
    proc = start(trainer_argv("allreduce", "--local-device-count", "3"), tmp_path / "one.log")
    assert wait_all([proc], 60) == [0]
    assert "Rank 0: process 0/1: local devices 3" in proc.output
    assert "psum of ones = 3 (expected 3)" in proc.output
