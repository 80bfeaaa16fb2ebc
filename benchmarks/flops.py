"""Achieved FLOP/s of the training step against this machine's matmul FLOP/s of the same precision,
in one process.

    python -m benchmarks.flops [--repeats R] [--block-seconds S] [--batch-size B]

1 process, 1 CPU device (XLA's intra-op threads use every core). Each repeat times, back to back
so that they share the machine's momentary load:
  matmul_<n>     jit(a @ b) on n×n fp32 matrices already on the device (the fp32 roofline)
  matmul_bf16_<n>  the same on bfloat16 matrices accumulated in float32, as the model's bfloat16
                 matmuls are (the bfloat16 roofline)
  step_matmuls   only the 8 matmuls of one step (forward, weight and input gradients) at their
                 batch-128 shapes: the best the step's own shapes get from XLA's matmul
  trainer        the trainer's training path (trainer.strategies, pmap strategy, the trainer's
                 optimizer) as trainer/train.py drives it: `strategy.run` over chunks of its default
                 steps per dispatch on the device-resident training set when the strategy has it,
                 else `strategy.step` on one host batch per step, dispatched without waiting
  trainer_bf16   the same with --precision bfloat16
  device_only    the same step on a batch already on the device: the compute-only bound
  grads_only     forward and backward on that batch without the optimizer update (its share of
                 the step is the update's cost)
  device_data    the same step fed from the training set kept on the device (uint8): per step only
                 the batch's indices are sent and the batch is gathered and scaled there (what
                 trainer/train.py could do instead of building each batch on the host)
  baseline       benchmarks.baseline's honest loop: jit with donated state, each host batch put on
                 the device, dispatched without waiting
  baseline_synced  benchmarks.baseline's synced loop: one host batch per step through pmap, wait
                 after each step
Prints one JSON object (FLOP/s are the analytic counts of benchmarks.flopcount ÷ measured time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from benchmarks import flopcount
from benchmarks.procs import MNIST_DIR

MATMUL_SIZES = (1024, 2048)
ROOFLINES = {"float32": "matmul_", "bfloat16": "matmul_bf16_"}  # precision: loop name prefix


def _steps_per_dispatch() -> int:
    """The trainer's default number of steps per device dispatch, capped by its log interval."""
    from trainer.config import TrainConfig

    cfg = TrainConfig()
    return max(1, min(getattr(cfg, "steps_per_dispatch", 1), cfg.log_every))


def _timed(fn, count: int) -> float:
    """Seconds per call of fn over `count` calls (fn(count) runs them and blocks at the end)."""
    started = time.perf_counter()
    fn(count)
    return (time.perf_counter() - started) / count


def _calibrate(fn, seconds: float) -> int:
    per_call = _timed(fn, 3)
    return max(3, int(seconds / max(per_call, 1e-6)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.flops")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--block-seconds", type=float, default=1.0, help="target duration of each timed block")
    p.add_argument("--batch-size", type=int, default=128)
    args = p.parse_args(argv)

    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 1)
    import jax.numpy as jnp

    from benchmarks import baseline
    from trainer import data, models, optimization
    from trainer.strategies import make_strategy

    batch = args.batch_size
    dataset = data.load_mnist(MNIST_DIR, download=False)
    images, labels = dataset.train_images, dataset.train_labels
    perm = data.epoch_permutation(len(labels), 0, 0)
    steps_per_epoch = data.steps_per_epoch(len(labels), batch)

    def host_batch(i: int):
        return data.local_batch(images, labels, perm, i % steps_per_epoch, batch, 0, 1)

    # -- the rooflines: square fp32 and bfloat16 matmuls
    matmuls = {}
    rng = np.random.default_rng(0)
    for precision, prefix in ROOFLINES.items():
        for n in MATMUL_SIZES:
            a = jax.device_put(rng.standard_normal((n, n), np.float32).astype(precision))
            b = jax.device_put(rng.standard_normal((n, n), np.float32).astype(precision))
            f = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))

            def run_matmul(count, f=f, a=a, b=b):
                out = None
                for _ in range(count):
                    out = f(a, b)
                out.block_until_ready()

            run_matmul(1)
            matmuls[f"{prefix}{n}"] = run_matmul

    # -- the step's matmuls alone (their FLOPs are exactly the analytic step count)
    layers = models.get(models.DEFAULT).matmul_shapes()
    shapes = [((batch, n_in), (n_in, n_out)) for n_in, n_out in layers]  # x @ W
    shapes += [((n_in, batch), (batch, n_out)) for n_in, n_out in layers]  # xᵀ @ dy
    shapes += [((batch, n_out), (n_out, n_in)) for n_in, n_out in layers[1:]]  # dy @ Wᵀ
    operands = [tuple(jax.device_put(rng.standard_normal(shape, np.float32)) for shape in pair) for pair in shapes]
    all_matmuls = jax.jit(lambda ops: [a @ b for a, b in ops])

    def run_step_matmuls(count):
        out = None
        for _ in range(count):
            out = all_matmuls(operands)
        jax.block_until_ready(out)

    # -- the trainer's step (its strategy and optimizer, as trainer/train.py builds them)
    optimizer = optimization.make_optimizer("sgd", 0.1, 0.9, 10**6, "cosine")
    params = models.get(models.DEFAULT).network().init_params(0)
    host_state = (params, jax.tree.map(np.asarray, optimizer.init(params)))
    strategy = make_strategy("pmap", optimizer, 1)
    trainer_state = [strategy.put_state(host_state)]
    train_data = strategy.put_data(images, labels)
    chunk = _steps_per_dispatch()

    def trainer_loop(strategy, state):
        """The trainer's loop: device-resident data, chunks of steps per dispatch."""
        def run(count):
            for first in range(0, count, chunk):
                n = min(chunk, count - first)
                idx = np.stack([data.local_indices(perm, (first + i) % steps_per_epoch, batch, 0, 1)
                                for i in range(chunk)]).astype(np.int32)
                state[0], _, _ = strategy.run(state[0], train_data, idx, n)  # returns host losses: waits
        return run

    run_trainer = trainer_loop(strategy, trainer_state)
    strategy_bf16 = make_strategy("pmap", optimizer, 1, precision="bfloat16")
    run_trainer_bf16 = trainer_loop(strategy_bf16, [strategy_bf16.put_state(host_state)])

    x0, y0 = host_batch(0)
    x_dev, y_dev = jax.device_put(x0), jax.device_put(y0)

    def run_device_only(count):
        state = trainer_state[0]
        for _ in range(count):
            state, loss, _ = strategy.step(state, x_dev, y_dev)
        jax.block_until_ready((state, loss))
        trainer_state[0] = state

    device_images = jax.device_put(images)
    device_labels = jax.device_put(labels)
    gather = jax.jit(lambda images, labels, idx: (images[idx].astype(jnp.float32) / 255.0, labels[idx]))

    def run_device_data(count):
        state = trainer_state[0]
        for i in range(count):
            start = (i % steps_per_epoch) * batch
            x, y = gather(device_images, device_labels, perm[start:start + batch])
            state, loss, _ = strategy.step(state, x, y)
        jax.block_until_ready((state, loss))
        trainer_state[0] = state

    grads = jax.jit(jax.value_and_grad(optimization.loss_and_correct, has_aux=True))
    device_params = jax.device_put(params)

    def run_grads_only(count):
        out = None
        for _ in range(count):
            out = grads(device_params, x_dev, y_dev)
        jax.block_until_ready(out)

    # -- the baselines' loops
    def baseline_loop(loop):
        state = [loop.put_state(host_state)]

        def run(count):
            for i in range(count):
                x, y = host_batch(i)
                state[0], loss = loop.step(state[0], x, y)
            jax.block_until_ready((state[0], loss))
        return run

    run_baseline = baseline_loop(baseline.AsyncLoop(optimizer))
    run_baseline_synced = baseline_loop(baseline.SyncedLoop(optimizer))

    # XLA's own FLOP count of the compiled step (includes the element-wise work the analytic count omits)
    def plain(state, x, y):
        (loss, _), grads = jax.value_and_grad(optimization.loss_and_correct, has_aux=True)(state[0], x, y)
        updates, opt_state = optimizer.update(grads, state[1], state[0])
        return (jax.tree.map(jnp.add, state[0], updates), opt_state), loss

    try:
        cost = jax.jit(plain).lower(host_state, x0, y0).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        xla_flops = float(cost.get("flops", 0.0)) or None
        xla_bytes = float(cost.get("bytes accessed", 0.0)) or None
    except Exception:  # cost analysis is best effort across jax versions
        xla_flops = xla_bytes = None

    loops = dict(matmuls)
    loops.update(step_matmuls=run_step_matmuls, trainer=run_trainer, trainer_bf16=run_trainer_bf16,
                 device_only=run_device_only, grads_only=run_grads_only, device_data=run_device_data,
                 baseline=run_baseline, baseline_synced=run_baseline_synced)
    for fn in loops.values():  # compile and warm up
        fn(2)
    counts = {name: _calibrate(fn, args.block_seconds) for name, fn in loops.items()}
    seconds = {name: [] for name in loops}
    for _ in range(args.repeats):
        for name, fn in loops.items():
            seconds[name].append(_timed(fn, counts[name]))

    step_flops = flopcount.step_flops(batch)
    flops_of = {f"{prefix}{n}": 2 * n**3 for prefix in ROOFLINES.values() for n in MATMUL_SIZES}
    result = {"batch_size": batch, "repeats": args.repeats, "step_flops_analytic": step_flops,
              "step_flops_xla": xla_flops, "step_bytes_accessed_xla": xla_bytes, "calls_per_block": counts, "loops": {}}
    for name, samples in seconds.items():
        work = flops_of.get(name, step_flops)
        rates = [work / s for s in samples]
        result["loops"][name] = {"seconds_per_call": statistics.median(samples),
                                 "flops_per_second": statistics.median(rates),
                                 "flops_per_second_samples": rates}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
