"""The baselines every trainer figure is compared with: the straightforward data-parallel loop.

    --loop async   (the honest baseline) as JAX's own SPMD MNIST example runs: the step is one
                   `jax.jit` with the parameters and optimizer state donated, each step's host batch
                   is put on the device(s) (`jax.device_put`, or `make_array_from_process_local_data`
                   across processes) and the step is dispatched without waiting for the previous one;
                   the host reads a loss only at step 1 and at each log line
    --loop synced  one host batch per step through `jax.pmap`, waiting for every step (float(loss))

Same model, initial parameters, optimizer, schedule, precision and batch order as the trainer
(trainer.models / trainer.optimization / trainer.data), so only the loop differs. Writes the trainer's metrics JSONL records
(start, step, epoch, end) so the harness reads all of them the same way.

    python -m benchmarks.baseline --data-dir DIR --metrics-file F [--loop async|synced]
        [--num-processes N --process-id I --coordinator-address HOST:PORT] [--epochs E ...]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

LOOPS = ("async", "synced")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.baseline", description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--metrics-file", required=True)
    p.add_argument("--loop", choices=LOOPS, default="async")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128, help="global batch size")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-examples", type=int, default=0, help="first N training examples (0 = all)")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--coordinator-address")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--init-timeout", type=int, default=60)
    return p.parse_args(argv)


def _grads(precision, params, x, y):
    """(gradients, loss, correct count) of the trainer's model on one batch."""
    import jax

    from trainer.optimization import loss_and_correct

    loss_fn = partial(loss_and_correct, precision=precision)
    (loss, correct), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
    return grads, loss, correct


class AsyncLoop:
    """The honest baseline: jit over every device of the job, state donated, no per-step wait."""

    def __init__(self, optimizer, precision: str = "float32"):
        import jax
        import optax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

        mesh = Mesh(np.array(jax.devices()), ("batch",))
        self.batch_sharding = NamedSharding(mesh, P("batch"))
        self.replicated = NamedSharding(mesh, P())

        def step(params, opt_state, x, y):
            # Global semantics: the mean loss over the global batch, so XLA all-reduces the gradients.
            grads, loss, correct = _grads(precision, params, x, y)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss, correct

        self._step = jax.jit(step, donate_argnums=(0, 1), out_shardings=self.replicated)

    def put_state(self, host_state):
        import jax

        return jax.device_put(host_state, self.replicated)

    def get_params(self, state):
        return {k: np.asarray(v.addressable_data(0)) for k, v in state[0].items()}

    def step(self, state, x: np.ndarray, y: np.ndarray):
        """Dispatch one step on this process's part of a global batch; returns (state, loss array)."""
        import jax

        gx = jax.make_array_from_process_local_data(self.batch_sharding, x)
        gy = jax.make_array_from_process_local_data(self.batch_sharding, y)
        params, opt_state, loss, _ = self._step(*state, gx, gy)
        return (params, opt_state), loss


def make_synced_step(optimizer, precision: str = "float32"):
    """The pmap step of the synced loop: gradients averaged (pmean) over the global batch."""
    import jax
    import optax

    def train_step(params, opt_state, x, y):
        grads, loss, correct = _grads(precision, params, x, y)
        grads = jax.lax.pmean(grads, "batch")
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "batch"),
                jax.lax.psum(correct, "batch"))

    return jax.pmap(train_step, axis_name="batch")


class SyncedLoop:
    """One host batch per step through pmap (one local device), waiting for every step."""

    def __init__(self, optimizer, precision: str = "float32"):
        self._step = make_synced_step(optimizer, precision)

    def put_state(self, host_state):
        return add_device_axis(host_state)

    def get_params(self, state):
        return {k: np.asarray(v)[0] for k, v in state[0].items()}

    def step(self, state, x: np.ndarray, y: np.ndarray):
        params, opt_state, loss = synced_step(self._step, *state, x, y)
        return (params, opt_state), loss


def add_device_axis(tree):
    """One local device: a leading axis of 1 on everything pmap sees."""
    import jax

    return jax.tree.map(lambda a: np.asarray(a)[None], tree)


def synced_step(step_fn, params, opt_state, x: np.ndarray, y: np.ndarray):
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
    from trainer import data, models, optimization
    from trainer.metrics import MetricsFile

    log_every = max(args.log_every, 1)
    metrics = MetricsFile(args.metrics_file if args.process_id == 0 else None)
    dataset = data.load_mnist(args.data_dir, download=False)
    images, labels = dataset.train_images, dataset.train_labels
    if args.train_examples:
        images, labels = images[:args.train_examples], labels[:args.train_examples]
    spe = data.steps_per_epoch(len(labels), args.batch_size)
    optimizer = optimization.make_optimizer(args.optimizer, args.learning_rate, args.momentum, args.epochs * spe,
                                     args.lr_schedule)
    params = models.get(models.DEFAULT).network().init_params(args.seed)
    loop = (AsyncLoop if args.loop == "async" else SyncedLoop)(optimizer, args.precision)
    state = loop.put_state((params, optimizer.init(params)))
    evaluate = jax.jit(partial(lambda p, x, y, precision: optimization.loss_and_correct(p, x, y, precision)[1],
                               precision=args.precision))
    metrics.write({"event": "start", "step": 0, "total_steps": args.epochs * spe, "processes": args.num_processes,
                   "local_devices": 1, "strategy": f"baseline-{args.loop}", "batch_size": args.batch_size,
                   "precision": args.precision})
    step = 0
    for epoch in range(args.epochs):
        perm = data.epoch_permutation(len(labels), args.seed, epoch)
        started = time.perf_counter()
        for s in range(spe):
            x, y = data.local_batch(images, labels, perm, s, args.batch_size, args.process_id, args.num_processes)
            state, loss = loop.step(state, x, y)
            step += 1
            if step == 1 or (s + 1) % log_every == 0:  # the only points where the async loop waits
                metrics.write({"event": "step", "epoch": epoch + 1, "step": step, "loss": float(loss)})
        host_params = loop.get_params(state)  # waits for the epoch's last step
        seconds = time.perf_counter() - started
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
