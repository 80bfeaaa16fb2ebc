"""The 2 × 1 epoch ÷ 1 × 1 epoch of this tree's trainer against another checkout's, interleaved.

    git worktree add /tmp/before <revision>       # or any other copy of the repository
    python -m benchmarks.scaling_ab /tmp/before [--repeats 3] [--train-examples N]

Each repeat runs, back to back, the 1 × 1 trainer (this tree; the 1-device step has no all-reduce)
and the 2 × 1 trainer of each tree (2 local processes × 1 CPU device, global batch 128), all with
`--epochs 2`; an epoch figure is the second epoch's seconds (the first includes compilation).
Ratios are taken within a repeat, then the median over repeats. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from benchmarks import procs
from benchmarks.figures import median, ratio


def epoch_seconds(run: procs.Run) -> float | None:
    return median([e["seconds"] for e in run.epochs() if e["epoch"] >= 2])


def measure(other: Path, repeats: int, train_examples: int, timeout: float, log) -> dict:
    args = ["--epochs", "2", *(["--train-examples", str(train_examples)] if train_examples else [])]
    rows = []
    for r in range(repeats):
        row = {"1x1": epoch_seconds(procs.run("trainer", args, 1, timeout))}
        for label, root in (("other", other), ("this", procs.REPO_ROOT)):
            row[label] = epoch_seconds(procs.run("trainer", args, 2, timeout, root=root))
        log(f"repeat {r + 1}: 1x1 {row['1x1']:.2f} s, 2x1 other {row['other']:.2f} s, this {row['this']:.2f} s")
        rows.append(row)
    return {
        "other_tree": str(other), "args": args, "repeats": repeats,
        "epoch_seconds": {k: median([row[k] for row in rows]) for k in ("1x1", "other", "this")},
        "scaling_2x1_over_1x1": {k: median([ratio(row[k], row["1x1"]) for row in rows]) for k in ("other", "this")},
        "this_over_other_2x1": median([ratio(row["this"], row["other"]) for row in rows]),
        "loadavg_after": os.getloadavg(), "samples": rows,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scaling_ab")
    p.add_argument("other", type=Path, help="another checkout of the repository (its trainer/ is run)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--train-examples", type=int, default=0, help="0 = all 60000")
    p.add_argument("--timeout", type=float, default=600, help="per run")
    args = p.parse_args(argv)
    if not (args.other / "trainer" / "__main__.py").is_file():
        print(f"scaling_ab: {args.other} holds no trainer/ (give a checkout of the repository)", file=sys.stderr)
        return 2
    load = os.getloadavg()
    result = measure(args.other.resolve(), args.repeats, args.train_examples, args.timeout,
                     lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps({"loadavg_before": load, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
