"""A SLURM host list expanded in full: the oracle trainer.cluster.first_host is checked against (the
trainer itself only ever needs the first host)."""

from __future__ import annotations

import itertools
import re

from trainer.cluster import _range_bounds, _split_top_level


def expand_hostlist(spec: str) -> list[str]:
    """Expand a SLURM host list such as ``node[01-03,7],gpu-a[1-2]-ib`` into host names.

    Zero padding of range bounds is kept (``n[08-10]`` -> n08 n09 n10); several bracket groups in
    one name expand as a cartesian product.
    """
    hosts: list[str] = []
    for item in _split_top_level(spec.strip()):
        if item:
            hosts.extend(_expand_item(item))
    return hosts


def _expand_item(item: str) -> list[str]:
    parts = re.split(r"(\[[^\]]*\])", item)
    choices = []
    for part in parts:
        if part.startswith("["):
            choices.append(_expand_ranges(part[1:-1], item))
        else:
            choices.append([part])
    return ["".join(p) for p in itertools.product(*choices)]


def _expand_ranges(body: str, item: str) -> list[str]:
    out = []
    for rng in body.split(","):
        lo, hi = _range_bounds(rng, item)
        out.extend(str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1))
    return out
