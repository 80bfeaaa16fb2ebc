"""The training loop: data → strategy steps → logs, metrics, checkpoints, evaluation."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import numpy as np

from trainer import checkpoint, data
from trainer.cluster import ClusterSpec
from trainer.errors import ConfigError
from trainer.metrics import Logger, MetricsFile, progress


@dataclass
class TrainConfig:
    epochs: int = 5
    batch_size: int = 128
    optimizer: str = "sgd"
    learning_rate: float = 0.1
    momentum: float = 0.9
    lr_schedule: str = "cosine"  # cosine: decay to 0 over the whole run; constant
    seed: int = 0
    strategy: str = "pmap"
    model_parallelism: int = 1
    platform: str = "cpu"
    data_dir: str = "."
    download: bool = True
    mirror: str = data.DEFAULT_MIRROR
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    metrics_file: str | None = None
    init_timeout: float = 300
    heartbeat_timeout: int = 100
    hidden: tuple[int, ...] = (1024, 1024)
    train_examples: int = 0  # 0 = the whole training set
    log_every: int = 100
    fault_after_step: int = 0  # test hook: SIGKILL this process after that global step

    def fingerprint(self) -> dict:
        """What a checkpoint's state depends on; resuming under other values would be wrong."""
        return {
            "hidden": list(self.hidden), "optimizer": self.optimizer, "learning_rate": self.learning_rate,
            "momentum": self.momentum, "batch_size": self.batch_size, "seed": self.seed,
            "train_examples": self.train_examples, "lr_schedule": self.lr_schedule,
            # the cosine schedule's length depends on the number of epochs
            "epochs": self.epochs if self.lr_schedule == "cosine" else None,
        }


def check_config(cfg: TrainConfig) -> None:
    rules = [
        (cfg.epochs >= 1, f"--epochs {cfg.epochs} must be >= 1"),
        (cfg.batch_size >= 1, f"--batch-size {cfg.batch_size} must be >= 1"),
        (cfg.learning_rate > 0, f"--learning-rate {cfg.learning_rate} must be > 0"),
        (0 <= cfg.momentum < 1, f"--momentum {cfg.momentum} must be in [0, 1)"),
        (cfg.checkpoint_every >= 0, f"--checkpoint-every {cfg.checkpoint_every} must be >= 0"),
        (cfg.init_timeout > 0, f"--init-timeout {cfg.init_timeout} must be > 0"),
        (cfg.heartbeat_timeout >= 1, f"--heartbeat-timeout {cfg.heartbeat_timeout} must be >= 1"),
        (cfg.model_parallelism >= 1, f"--model-parallelism {cfg.model_parallelism} must be >= 1"),
        (cfg.model_parallelism == 1 or cfg.strategy == "sharded", "--model-parallelism > 1 needs --strategy sharded"),
        (all(h % cfg.model_parallelism == 0 for h in cfg.hidden),
         f"--model-parallelism {cfg.model_parallelism} must divide the hidden sizes {list(cfg.hidden)}"),
    ]
    for ok, message in rules:
        if not ok:
            raise ConfigError(message)


def check_layout(cfg: TrainConfig, spec: ClusterSpec, local_devices: int, num_examples: int) -> None:
    global_devices = spec.num_processes * local_devices
    if cfg.batch_size % global_devices:
        raise ConfigError(
            f"--batch-size {cfg.batch_size} is not divisible by the global device count {global_devices} "
            f"({spec.num_processes} processes x {local_devices} devices)"
        )
    if local_devices % cfg.model_parallelism:
        raise ConfigError(
            f"--model-parallelism {cfg.model_parallelism} must divide the local device count {local_devices}"
        )
    if cfg.batch_size > num_examples:
        raise ConfigError(f"--batch-size {cfg.batch_size} exceeds the {num_examples} training examples")


def _restore(cfg, spec, host_state, jax, log):
    """(start_step, host_state): process 0 reads its newest checkpoint and broadcasts it to all."""
    leaves, treedef = jax.tree.flatten(host_state)
    found = None
    if spec.process_id == 0 and cfg.checkpoint_dir:
        found = checkpoint.load_latest(cfg.checkpoint_dir, cfg.fingerprint(), log)
    step = found[0] if found else 0
    if found:
        leaves = [np.asarray(x, dtype=t.dtype).reshape(t.shape) for x, t in zip(found[1], leaves)]
    if spec.distributed:
        from jax.experimental import multihost_utils

        step, leaves = multihost_utils.broadcast_one_to_all((np.int32(step), leaves))
        step, leaves = int(step), [np.asarray(x) for x in leaves]
    if step:
        log(f"resuming from the checkpoint of step {step}")
    return step, jax.tree.unflatten(treedef, leaves)


def _save(cfg, spec, strategy, state, step, jax, log):
    host_state = strategy.get_state(state)  # collective for sharded arrays: every process calls it
    if spec.process_id == 0 and cfg.checkpoint_dir:
        paths_leaves = jax.tree_util.tree_flatten_with_path(host_state)[0]
        path = checkpoint.save(cfg.checkpoint_dir, step, [leaf for _, leaf in paths_leaves], cfg.fingerprint(),
                               [jax.tree_util.keystr(p) for p, _ in paths_leaves])
        log(f"checkpoint saved at step {step}: {path}")
    return host_state


def _test_accuracy(jax, spec, params, dataset) -> float:
    """Each process scores a strided share of the test set; the counts are summed over processes."""
    from trainer.strategies import count_correct

    images = dataset.test_images[spec.process_id::spec.num_processes]
    labels = dataset.test_labels[spec.process_id::spec.num_processes]
    correct = count_correct(params, images, labels)
    if spec.distributed:
        from jax.experimental import multihost_utils

        correct = int(np.sum(multihost_utils.process_allgather(np.array([correct], np.int32))))
    return correct / len(dataset.test_labels)


def train(cfg: TrainConfig, spec: ClusterSpec) -> int:
    log = Logger(spec.process_id)
    check_config(cfg)
    log(f"cluster: {spec.describe()}")
    dataset = data.load_mnist(cfg.data_dir, cfg.download, cfg.mirror, log)
    if cfg.train_examples:
        dataset.train_images = dataset.train_images[: cfg.train_examples]
        dataset.train_labels = dataset.train_labels[: cfg.train_examples]
    num_examples = len(dataset.train_labels)

    from trainer import runtime

    jax = runtime.initialize(spec, cfg.platform, cfg.init_timeout, cfg.heartbeat_timeout, log)
    local_devices = jax.local_device_count()
    check_layout(cfg, spec, local_devices, num_examples)
    log(f"{local_devices} local devices, {jax.device_count()} global devices, strategy {cfg.strategy}")

    from trainer import model
    from trainer.strategies import make_strategy

    spe = data.steps_per_epoch(num_examples, cfg.batch_size)
    total = cfg.epochs * spe
    optimizer = model.make_optimizer(cfg.optimizer, cfg.learning_rate, cfg.momentum, total, cfg.lr_schedule)
    params = model.init_params(cfg.seed, tuple(cfg.hidden))
    host_state = (params, jax.tree.map(np.asarray, optimizer.init(params)))
    step, host_state = _restore(cfg, spec, host_state, jax, log)
    strategy = make_strategy(cfg.strategy, optimizer, local_devices, cfg.model_parallelism, params)
    state = strategy.put_state(host_state)

    rank0 = spec.process_id == 0
    metrics_path = cfg.metrics_file or (os.path.join(cfg.checkpoint_dir, "metrics.jsonl") if cfg.checkpoint_dir else None)
    metrics = MetricsFile(metrics_path if rank0 else None)
    # Several local CPU devices deadlock the all-reduce unless every step is waited for (jax 0.10).
    block_each_step = cfg.platform == "cpu" and local_devices > 1
    metrics.write({"event": "start", "step": step, "total_steps": total, "processes": spec.num_processes,
                   "local_devices": local_devices, "strategy": cfg.strategy, "batch_size": cfg.batch_size})

    saved_step = step
    for epoch in range(step // spe, cfg.epochs):
        perm = data.epoch_permutation(num_examples, cfg.seed, epoch)
        first = step - epoch * spe
        losses, corrects = [], []
        bar = progress(spe - first, f"epoch {epoch + 1}/{cfg.epochs}", rank0)
        started = time.perf_counter()
        for s in range(first, spe):
            x, y = data.local_batch(dataset.train_images, dataset.train_labels, perm, s, cfg.batch_size,
                                    spec.process_id, spec.num_processes)
            state, loss, correct = strategy.step(state, x, y)
            if block_each_step:
                jax.block_until_ready(loss)
            losses.append(loss)
            corrects.append(correct)
            step += 1
            if bar is not None:
                bar.update(1)
            if (s + 1) % cfg.log_every == 0 or s + 1 == spe:
                value = strategy.scalar(loss)
                if bar is None:
                    log(f"epoch {epoch + 1}/{cfg.epochs}, batch {s + 1}/{spe}, loss={value:.4f}")
                metrics.write({"event": "step", "epoch": epoch + 1, "step": step, "loss": value})
            if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < total:
                _save(cfg, spec, strategy, state, step, jax, log)
                saved_step = step
            if cfg.fault_after_step and step == cfg.fault_after_step:
                log(f"fault injection: killing this process after step {step}")
                os.kill(os.getpid(), signal.SIGKILL)
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - started
        epoch_loss = float(np.mean([strategy.scalar(v) for v in losses]))
        train_acc = sum(strategy.scalar(c) for c in corrects) / (len(corrects) * cfg.batch_size)
        params_host = strategy.get_state(state)[0]
        test_acc = _test_accuracy(jax, spec, params_host, dataset)
        log(f"epoch {epoch + 1}/{cfg.epochs}, average epoch loss={epoch_loss:.4f}")
        log(f"epoch {epoch + 1}/{cfg.epochs}, train accuracy={train_acc:.4f}, test accuracy={test_acc:.4f}, "
            f"{seconds:.1f} s, {len(losses) * cfg.batch_size / seconds:.0f} examples/s")
        metrics.write({"event": "epoch", "epoch": epoch + 1, "step": step, "loss": epoch_loss,
                       "train_accuracy": train_acc, "test_accuracy": test_acc, "seconds": round(seconds, 3),
                       "batches": len(losses), "examples_per_second": len(losses) * cfg.batch_size / seconds})
    if saved_step != step:  # the same decision on every process (the save may be collective)
        _save(cfg, spec, strategy, state, step, jax, log)
    metrics.write({"event": "end", "step": step})
    log("training completed.")
    if spec.distributed:
        jax.distributed.shutdown()
    return 0

