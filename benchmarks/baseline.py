"""The plain baseline: the straightforward data-parallel loop every figure is compared with.

One host batch is fed per step (NumPy → pmap, which copies it to the device), and the loop syncs
after every step (float(loss)). Same model, initial parameters, optimizer, schedule and batch order
as the trainer (trainer.model / trainer.data), so only the loop differs. Writes the trainer's
metrics JSONL records (start, step, epoch, end) so the harness reads both the same way.

    python -m benchmarks.baseline --data-dir DIR --metrics-file F [--num-processes N --process-id I
        --coordinator-address HOST:PORT] [--epochs E --batch-size B ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.baseline", description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--metrics-file", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128, help="global batch size")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-examples", type=int, default=0, help="first N training examples (0 = all)")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--coordinator-address")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--init-timeout", type=int, default=60)
    return p.parse_args(argv)


def make_step(optimizer):
    """The seeds' pmap step: gradients averaged (pmean) over the global batch."""
    import jax
    import optax

    from trainer import model

    def train_step(params, opt_state, x, y):
        (loss, correct), grads = jax.value_and_grad(model.loss_and_correct, has_aux=True)(params, x, y)
        grads = jax.lax.pmean(grads, "batch")
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "batch"),
                jax.lax.psum(correct, "batch"))

    return jax.pmap(train_step, axis_name="batch")


def add_device_axis(tree):
    """One local device: a leading axis of 1 on everything pmap sees."""
    import jax

    return jax.tree.map(lambda a: np.asarray(a)[None], tree)


def plain_step(step_fn, params, opt_state, x: np.ndarray, y: np.ndarray):
    """One host batch in, one step, then wait for it (float of the loss)."""
    params, opt_state, loss, _ = step_fn(params, opt_state, x[None], y[None])
    return params, opt_state, float(loss[0])


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 1)
    if args.num_processes > 1:
        jax.distributed.initialize(args.coordinator_address, args.num_processes, args.process_id,
                                   cluster_detection_method="deactivate",
                                   initialization_timeout=args.init_timeout)
    from trainer import data, model
    from trainer.metrics import MetricsFile

    log_every = max(args.log_every, 1)
    metrics = MetricsFile(args.metrics_file if args.process_id == 0 else None)
    dataset = data.load_mnist(args.data_dir, download=False)
    images, labels = dataset.train_images, dataset.train_labels
    if args.train_examples:
        images, labels = images[:args.train_examples], labels[:args.train_examples]
    spe = data.steps_per_epoch(len(labels), args.batch_size)
    optimizer = model.make_optimizer(args.optimizer, args.learning_rate, args.momentum, args.epochs * spe,
                                     args.lr_schedule)
    params = model.init_params(args.seed)
    opt_state = optimizer.init(params)

    step_fn = make_step(optimizer)
    evaluate = jax.jit(lambda p, x, y: model.loss_and_correct(p, x, y)[1])
    params, opt_state = add_device_axis((params, opt_state))
    metrics.write({"event": "start", "step": 0, "total_steps": args.epochs * spe, "processes": args.num_processes,
                   "local_devices": 1, "strategy": "baseline", "batch_size": args.batch_size})
    step = 0
    for epoch in range(args.epochs):
        perm = data.epoch_permutation(len(labels), args.seed, epoch)
        started = time.perf_counter()
        for s in range(spe):
            x, y = data.local_batch(images, labels, perm, s, args.batch_size, args.process_id, args.num_processes)
            params, opt_state, loss = plain_step(step_fn, params, opt_state, x, y)
            step += 1
            if step == 1 or (s + 1) % log_every == 0:
                metrics.write({"event": "step", "epoch": epoch + 1, "step": step, "loss": loss})
        seconds = time.perf_counter() - started
        host_params = jax.tree.map(lambda a: np.asarray(a)[0], params)
        correct = sum(int(evaluate(host_params, dataset.test_images[i:i + 2000].astype(np.float32) / 255.0,
                                   dataset.test_labels[i:i + 2000]))
                      for i in range(0, len(dataset.test_labels), 2000))
        metrics.write({"event": "epoch", "epoch": epoch + 1, "step": step, "seconds": round(seconds, 3),
                       "batches": spe, "examples_per_second": spe * args.batch_size / seconds,
                       "test_accuracy": correct / len(dataset.test_labels)})
        print(f"Rank {args.process_id}: epoch {epoch + 1}: {seconds:.2f} s, test accuracy "
              f"{correct / len(dataset.test_labels):.4f}", flush=True)
    metrics.write({"event": "end", "step": step})
    if args.num_processes > 1:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
