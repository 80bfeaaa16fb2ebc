"""`python -m trainer {train,query,allreduce}` (argparse: nothing beyond the standard library before
a command runs, and jax only once the ClusterSpec and the CPU device count are known)."""

from __future__ import annotations

import argparse
import os

from trainer import data
from trainer.cluster import resolve_cluster
from trainer.errors import TrainerError, report
from trainer.runtime import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_INIT_TIMEOUT
from trainer.train import PRECISIONS

DEFAULT_DATA_DIR = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "jax-training", "mnist")


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be >= 1")
    return sizes


def _cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster (default: from the environment, see trainer/cluster.py)")
    g.add_argument("--coordinator-address", help="HOST:PORT of process 0's coordinator")
    g.add_argument("--coordinator-port", type=int, help="port when the coordinator comes without one (SLURM)")
    g.add_argument("--num-processes", type=int)
    g.add_argument("--process-id", type=int)
    g.add_argument("--local-device-count", type=int, help="devices per process (CPU: forced devices)")
    g.add_argument("--platform", choices=["cpu", "gpu"], default="cpu")
    g.add_argument("--init-timeout", type=float, default=DEFAULT_INIT_TIMEOUT,
                   help="seconds to wait for every peer")
    g.add_argument("--heartbeat-timeout", type=int, default=DEFAULT_HEARTBEAT_TIMEOUT,
                   help="seconds before a silent peer is dead")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="data-parallel MNIST training")
    t.add_argument("--epochs", type=int, default=5)
    t.add_argument("--batch-size", type=int, default=128, help="global batch size")
    t.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    t.add_argument("--learning-rate", type=float, default=0.1)
    t.add_argument("--momentum", type=float, default=0.9)
    t.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine",
                   help="cosine decays the learning rate to 0 over the run")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--strategy", choices=["pmap", "sharded"], default="pmap")
    t.add_argument("--model-parallelism", type=int, default=1, help="model axis size (strategy sharded)")
    t.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    t.add_argument("--download", action=argparse.BooleanOptionalAction, default=True)
    t.add_argument("--mirror", default=data.DEFAULT_MIRROR)
    t.add_argument("--checkpoint-dir", help="checkpoints and metrics.jsonl (none = no checkpoints)")
    t.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0 = at the end)")
    t.add_argument("--metrics-file", help="default: <checkpoint-dir>/metrics.jsonl")
    t.add_argument("--log-every", type=int, default=100, help="steps between progress log lines")
    t.add_argument("--hidden-sizes", type=_hidden, default=(1024, 1024), help="e.g. 1024,1024")
    t.add_argument("--train-examples", type=int, default=0, help="use the first N training examples (0 = all)")
    t.add_argument("--steps-per-dispatch", type=int, default=50,
                   help="training steps run by one device dispatch (a device-side loop)")
    t.add_argument("--allreduce-dtype", choices=["float32", "bfloat16"], default="float32",
                   help="precision of the gradient all-reduce (strategy pmap); bfloat16 sends half the bytes")
    t.add_argument("--precision", choices=PRECISIONS, default=PRECISIONS[0],
                   help="matmuls and activations; parameters, loss and optimizer state stay float32")
    t.add_argument("--cpu-threads", type=int, default=0,
                   help="XLA CPU threads (0 = this process's share of the CPUs it shares with peers on this host)")
    t.add_argument("--compilation-cache", metavar="DIR",
                   help="persistent XLA compilation cache ('' = off; default: $JAX_COMPILATION_CACHE_DIR, "
                        "else <checkpoint-dir>/xla-cache)")
    t.add_argument("--hang-timeout", type=float, default=600,
                   help="seconds without a completed training step (compilation not counted) before the "
                        "process dumps its threads' stacks and exits with the hang code (0 = off)")
    t.add_argument("--fault-after-step", type=int, default=0, help=argparse.SUPPRESS)
    t.add_argument("--hang-after-step", type=int, default=0, help=argparse.SUPPRESS)
    _cluster_args(t)

    for name, text in (("query", "print local and global devices"),
                       ("allreduce", "also check that a psum of ones equals the global device count")):
        _cluster_args(sub.add_parser(name, help=text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = None
    try:
        spec = resolve_cluster(
            os.environ,
            coordinator_address=args.coordinator_address,
            num_processes=args.num_processes,
            process_id=args.process_id,
            local_device_count=args.local_device_count,
            coordinator_port=args.coordinator_port,
        )
        if args.command == "train":
            from trainer.train import TrainConfig, train

            cfg = TrainConfig(
                epochs=args.epochs, batch_size=args.batch_size, optimizer=args.optimizer,
                learning_rate=args.learning_rate, momentum=args.momentum, lr_schedule=args.lr_schedule, seed=args.seed,
                strategy=args.strategy, model_parallelism=args.model_parallelism, platform=args.platform,
                data_dir=args.data_dir, download=args.download, mirror=args.mirror,
                checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                metrics_file=args.metrics_file, init_timeout=args.init_timeout,
                heartbeat_timeout=args.heartbeat_timeout, hidden=args.hidden_sizes,
                train_examples=args.train_examples, log_every=max(args.log_every, 1),
                fault_after_step=args.fault_after_step, hang_after_step=args.hang_after_step,
                hang_timeout=args.hang_timeout, steps_per_dispatch=args.steps_per_dispatch,
                cpu_threads=args.cpu_threads, allreduce_dtype=args.allreduce_dtype, precision=args.precision,
                compilation_cache=args.compilation_cache,
            )
            return train(cfg, spec)
        from trainer.query import query

        return query(spec, args.platform, args.init_timeout, args.heartbeat_timeout, args.command == "allreduce")
    except TrainerError as e:
        return report(e, spec)
