"""Bytes all-reduced per training step, read from the HLO that XLA actually compiled.

    python -m benchmarks.allreduce [--batch-size B]

Runs one step of the trainer's pmap and sharded strategies and of the baseline on 2 local CPU
devices in a child process started with XLA_FLAGS=--xla_dump_to, then sums the result shapes of every all-reduce in each
step's optimized HLO module. The same collectives run between 2 processes × 1 device (only their
transport differs: gloo over TCP). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
               "f32": 4, "s64": 8, "u64": 8, "f64": 8}
SHAPE = re.compile(r"\b(" + "|".join(DTYPE_BYTES) + r")\[([\d,]*)\]")
# `%name = <result shape> all-reduce(` or its async form `all-reduce-start(`
ALL_REDUCE = re.compile(r"=\s*(.+?)\s+all-reduce(?:-start)?\(")


def shape_bytes(text: str) -> int:
    total = 0
    for dtype, dims in SHAPE.findall(text):
        total += DTYPE_BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
    return total


def all_reduces(hlo: str) -> list[int]:
    """Bytes of each all-reduce instruction of an HLO module (its result: one buffer or a tuple)."""
    sizes = []
    for line in hlo.splitlines():
        m = ALL_REDUCE.search(line)
        if m and "all-reduce-done" not in line:
            sizes.append(shape_bytes(m.group(1)))
    return sizes


def step_module(dump_dir: Path) -> str:
    """The optimized HLO text of the training step: the dumped module with the most dot instructions
    (module names depend on how pmap/jit wrap the function, the matmuls do not)."""
    modules = [p.read_text() for p in sorted(dump_dir.glob("*after_optimizations.txt"))]
    if not modules:
        raise SystemExit(f"no optimized HLO module dumped into {dump_dir}")
    return max(modules, key=lambda text: len(re.findall(r"\sdot\(", text)))


PROGRAMS = ("trainer_pmap", "trainer_sharded", "baseline")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.allreduce")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)  # set in the child that compiles the steps
    args = p.parse_args(argv)
    if args.dump_dir:
        return _child(Path(args.dump_dir), args.batch_size)
    import subprocess

    with tempfile.TemporaryDirectory(prefix="jaxt-hlo-") as tmp:
        # XLA reads XLA_FLAGS once per process: the steps are compiled in a child started with them.
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={tmp} --xla_dump_hlo_as_text".strip()
        subprocess.run([sys.executable, "-m", "benchmarks.allreduce", "--batch-size", str(args.batch_size),
                        "--dump-dir", tmp], env={**os.environ, "XLA_FLAGS": flags}, check=True, timeout=300)
        results = {}
        for name in PROGRAMS:
            sizes = all_reduces(step_module(Path(tmp) / name))
            results[name] = {"bytes_per_step": sum(sizes), "all_reduce_ops": len(sizes),
                             "largest_op_bytes": max(sizes, default=0)}
    print(json.dumps(results))
    return 0


def _child(dump_dir: Path, batch: int) -> int:
    """Run one step of each program on 2 local devices; file each program's dumped modules apart."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 2)
    from benchmarks import baseline
    from trainer import models, optimization
    from trainer.strategies import make_strategy

    model = models.get(models.DEFAULT)  # the model the benchmarks measure
    optimizer = optimization.make_optimizer("sgd", 0.1, 0.9, 1000, "cosine")
    params = model.network().init_params(0)
    host_state = (params, jax.tree.map(np.asarray, optimizer.init(params)))
    rng = np.random.default_rng(0)
    x = rng.random((batch, model.inputs), np.float32)
    y = rng.integers(0, model.classes, batch).astype(np.int32)
    for name in PROGRAMS:
        before = set(dump_dir.iterdir())
        if name == "baseline":
            loop = baseline.AsyncLoop(optimizer)
            out = loop.step(loop.put_state(host_state), x, y)
        else:
            strategy = make_strategy(name.split("_")[1], optimizer, 2)
            out = strategy.step(strategy.put_state(host_state), x, y)
        jax.block_until_ready(out)
        (dump_dir / name).mkdir()
        for path in set(dump_dir.iterdir()) - before:  # compilation (and its dump) is synchronous
            if path.is_file():
                path.rename(dump_dir / name / path.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
