"""The JAX the trainer is tested with, and the start-up check of the JAX a process got.

An image the project did not build (or a venv) may hold any jax and jaxlib; outside the tested range
the trainer may fail anywhere, or train differently, so it refuses at start, in one line, before
jax is imported (an incompatible jaxlib can fail that import with jax's own traceback). Standard
library only: the versions are read from the installed distributions' metadata.
"""

from __future__ import annotations

import re
from importlib import metadata

from trainer.errors import ConfigError

# The one home of the range of jax and jaxlib the trainer supports, [lowest, below): pyproject.toml's
# trainer extra states it for pip (a test holds the two equal), trainer/constraints.txt pins the
# tested versions inside it (one JAX line per Python).
LOWEST, BELOW = "0.10.2", "0.13"
PACKAGES = ("jax", "jaxlib")


def supported() -> str:
    """The range as a version specifier, as pip reads it: >=0.10.2,<0.13."""
    return f">={LOWEST},<{BELOW}"


def _release(version: str) -> tuple[int, ...]:
    """The release numbers a version starts with: 0.12.0.1 → (0, 12, 0, 1); 0.13.0rc1 → (0, 13, 0)."""
    found = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def in_range(version: str) -> bool:
    return _release(LOWEST) <= _release(version) < _release(BELOW)


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check(found: dict[str, str | None] | None = None) -> None:
    """Refuse, in one line naming each package, a jax or jaxlib that is missing or outside the range.
    `found`: {package: version or None}, by default what this Python has installed."""
    found = {name: installed(name) for name in PACKAGES} if found is None else found
    wrong = [f"{name} {version}" if version else f"no {name}" for name, version in found.items()
             if not version or not in_range(version)]
    if wrong:
        raise ConfigError(f"this Python has {' and '.join(wrong)}; the trainer is tested with jax and jaxlib "
                          f"{supported()} (trainer/versions.py): run it on an image or in a venv with JAX in "
                          "that range")
