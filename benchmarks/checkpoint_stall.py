"""How long checkpoint saves stall the step loop, as a fraction of the interval between saves.

One trainer process (1 CPU device, the default model, batch 128) saves every `--every` steps; its
own "checkpoint" metrics records (trainer/checkpoint_writer.py) carry, per save, when it began,
how long the step loop was blocked (waiting for the previous write, copying the state to the host)
and how long the background write took. The stall of a save is its blocked time ÷ the time since
the previous save began; the final save, joined before the process ends, is not periodic and is
left out. The write's share of the same interval is what a synchronous save would have stalled.

    python -m benchmarks.checkpoint_stall [--every 100] [--epochs 2] [--train-examples N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from benchmarks import procs
from benchmarks.figures import median


def _stalls(records: list[dict], every: int) -> list[dict]:
    """Per periodic save after the first: its interval, blocked and write seconds."""
    total = next(r["total_steps"] for r in records if r.get("event") == "start")
    saves = [r for r in records if r.get("event") == "checkpoint" and r["step"] % every == 0 and r["step"] < total]
    return [{"step": b["step"], "interval_seconds": b["started"] - a["started"],
             "blocked_seconds": b["blocked_seconds"], "write_seconds": b["write_seconds"]}
            for a, b in zip(saves, saves[1:])]


def run(every: int, epochs: int, train_examples: int, repeats: int, timeout: float, log=lambda _: None) -> dict:
    args = ["--epochs", str(epochs), "--checkpoint-every", str(every), "--log-every", str(every),
            *(["--train-examples", str(train_examples)] if train_examples else [])]
    samples = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory(prefix="jaxt-ckpt-") as directory:
            stalls = _stalls(procs.run("trainer", [*args, "--checkpoint-dir", directory], 1, timeout).records, every)
        if not stalls:
            raise procs.RunFailed(f"checkpoint stall: fewer than 2 periodic saves with {args}")
        samples.append({
            "stall_over_interval": median([s["blocked_seconds"] / s["interval_seconds"] for s in stalls]),
            "stall_over_interval_max": max(s["blocked_seconds"] / s["interval_seconds"] for s in stalls),
            "write_over_interval": median([s["write_seconds"] / s["interval_seconds"] for s in stalls]),
            "blocked_seconds": median([s["blocked_seconds"] for s in stalls]),
            "write_seconds": median([s["write_seconds"] for s in stalls]),
            "interval_seconds": median([s["interval_seconds"] for s in stalls]),
            "saves": stalls})
        log(f"checkpoint stall #{r + 1}: blocked {samples[-1]['blocked_seconds'] * 1e3:.1f} ms of "
            f"{samples[-1]['interval_seconds']:.2f} s between saves ({samples[-1]['stall_over_interval']:.2%}); "
            f"the write {samples[-1]['write_seconds'] * 1e3:.0f} ms in the background")
    keys = [k for k in samples[0] if k != "saves"]
    return {"args": args, **{k: median([s[k] for s in samples]) for k in keys},
            "stall_over_interval_max": max(s["stall_over_interval_max"] for s in samples), "samples": samples}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint_stall", description=__doc__.split("\n")[0])
    p.add_argument("--every", type=int, default=100, help="steps between checkpoints (default: 100)")
    p.add_argument("--epochs", type=int, default=2, help="epochs of the run (default: 2)")
    p.add_argument("--train-examples", type=int, default=0, help="0 = all 60000 (468 steps of 128 an epoch)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    result = run(args.every, args.epochs, args.train_examples, args.repeats, 600,
                 lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
