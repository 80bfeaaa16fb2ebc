"""The pip extra each command needs: a command run without it says so in one line, not in a traceback
from an import (the package alone installs jaxgen; the trainer and plot extras add jax and matplotlib)."""

from __future__ import annotations

import importlib.util


def missing(module: str, extra: str, command: str) -> str | None:
    """None when `module` can be imported, else the line that names the extra which installs it."""
    if importlib.util.find_spec(module) is not None:
        return None
    return (f"{command} needs {module}, from the '{extra}' extra: pip install 'jax-training[{extra}]' "
            "(in a checkout: scripts/setup.sh python)")
