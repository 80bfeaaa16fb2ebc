"""The speed options change nothing in the maths: chunked dispatch, the compilation cache, CPU
thread sizing; the bfloat16 all-reduce stays close to float32."""

import os
import shutil

import numpy as np
import pytest

from tests.support.procs import latest_checkpoint, free_port, outputs_of, run_cluster, small_train_args, start, trainer_argv, wait_all
from trainer import checkpoint
from generator.plot import read_records
from trainer.runtime import compilation_cache_key, cpu_budget
from trainer.config import TrainConfig
from trainer.faults import Faults
from trainer.train import _chunk_end


def params_of(directory) -> dict[str, np.ndarray]:
    meta, leaves = checkpoint.read(latest_checkpoint(directory))
    return {name: value for name, value in leaves.items() if name.startswith("[0]")}


def chunks(cfg: TrainConfig, spe: int, epoch: int, start: int = 0, stops: tuple[int, ...] = ()) -> list[int]:
    ends, s = [], start
    while s < spe:
        s = _chunk_end(cfg, s, spe, epoch * spe, min(cfg.steps_per_dispatch, cfg.log_every, spe), stops)
        ends.append(s)
    return ends


def test_chunks_end_at_log_lines_checkpoints_faults_and_the_epoch_end():
    assert chunks(TrainConfig(steps_per_dispatch=50, log_every=100), 468, 0) == [50, 100, 150, 200, 250, 300, 350,
                                                                                  400, 450, 468]
    assert chunks(TrainConfig(steps_per_dispatch=8, log_every=100, checkpoint_every=10), 32, 1) == [
        8, 16, 18, 26, 28, 32]  # global steps 50 and 60 are checkpoints
    assert chunks(TrainConfig(steps_per_dispatch=8, log_every=5), 32, 1, 10, Faults(fault_after_step=45).stops()) == [
        13, 15, 20, 25, 30, 32]
    assert chunks(TrainConfig(steps_per_dispatch=50, log_every=1), 3, 0) == [1, 2, 3]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_steps_per_dispatch_and_the_compilation_cache_do_not_change_the_parameters(tmp_path):
    cache, moved = tmp_path / "xla-cache", tmp_path / "elsewhere" / "xla-cache"
    results = {}
    for name, extra in [("one", ["--steps-per-dispatch", "1"]), ("seven", ["--steps-per-dispatch", "7"]),
                        ("cached", ["--compilation-cache", str(cache)]),
                        ("warm", ["--compilation-cache", str(moved)])]:
        ckpt = tmp_path / name
        args = small_train_args(ckpt, "--epochs", "2", "--checkpoint-every", "10", *extra)
        procs = run_cluster(tmp_path, name, lambda rank: trainer_argv(*args), 1, 1, 120)
        results[name] = params_of(ckpt)
        folder = moved / compilation_cache_key("cpu")
        if name == "cached":  # one folder, of this JAX and trainer (trainer/runtime.py compilation_cache_key)
            assert os.listdir(cache) == [folder.name]
            written = sorted(os.listdir(cache / folder.name))
            assert len(written) >= 2, "the compiled programs were not written to the cache"
            assert f"compilation cache: 0 programs read, {len(written)} compiled, {len(written)} written" in procs[0].output
            shutil.copytree(cache, moved)  # a cache copied or mounted elsewhere serves as well
        if name == "warm":  # the restart reads every program, compiles none
            assert f"compilation cache: {folder}" in procs[0].output
            assert sorted(os.listdir(folder)) == written
            assert f"compilation cache: {len(written)} programs read, 0 compiled, 0 written" in procs[0].output
    assert (outputs_of(tmp_path / "one") / "xla-cache").is_dir()  # default: in the job's outputs
    for name in ("seven", "cached", "warm"):
        for key, value in results["one"].items():
            np.testing.assert_array_equal(value, results[name][key], err_msg=f"{name} {key}")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bfloat16_allreduce_stays_close_to_float32_and_threads_are_shared(tmp_path):
    results, accuracy = {}, {}
    for name, extra in [("f32", []), ("bf16", ["--allreduce-dtype", "bfloat16"])]:
        args = small_train_args(tmp_path / name, "--epochs", "3", *extra)
        procs = run_cluster(tmp_path, name, lambda rank: trainer_argv(*args), 2, 1, 180)
        results[name] = params_of(tmp_path / name)
        accuracy[name] = [r["test_accuracy"] for r in read_records(outputs_of(tmp_path / name) / "metrics.jsonl")
                          if r["event"] == "epoch"][-1]
        budget = cpu_budget()
        assert (f"2 processes share this host's {budget} CPUs: {max(budget // 2, 1)} XLA CPU threads each"
                in procs[0].output)
    diff = max(float(np.max(np.abs(results["f32"][k] - results["bf16"][k])) / np.max(np.abs(results["f32"][k])))
               for k in results["f32"])
    print(f"bfloat16 all-reduce: max relative parameter difference to float32 {diff:.2e}, "
          f"test accuracy {accuracy['bf16']:.4f} vs {accuracy['f32']:.4f}")
    assert diff > 0  # the option is in effect
    assert accuracy["f32"] > 0.85 and abs(accuracy["bf16"] - accuracy["f32"]) < 0.02


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_processes_with_different_thread_settings_still_meet(tmp_path):
    """The host exchange behind the default thread count is a barrier every process joins."""
    port = free_port()
    procs = []
    for rank, extra in enumerate([["--cpu-threads", "1"], []]):  # explicit, automatic
        env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(rank)}
        argv = trainer_argv(*small_train_args(tmp_path / f"c{rank}", "--init-timeout", "60", *extra))
        procs.append(start(argv, tmp_path / f"rank{rank}.log", env))
    assert wait_all(procs, 180) == [0, 0], "\n".join(p.output[-2000:] for p in procs)


def test_bfloat16_allreduce_needs_the_pmap_strategy(tmp_path):
    proc = start(trainer_argv(*small_train_args(tmp_path / "c", "--strategy", "sharded", "--allreduce-dtype",
                                                "bfloat16")), tmp_path / "bad.log")
    assert wait_all([proc], 60) == [2]
    assert "--allreduce-dtype bfloat16 needs --strategy pmap" in proc.output


def test_cpu_budget_is_within_the_affinity_mask():
    assert 1 <= cpu_budget() <= len(os.sched_getaffinity(0))
