"""A copy of the checkout as a clone would have it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import CACHE, REPO_ROOT


def tracked_copy(dest: Path) -> Path:
    """The files git tracks (a clean clone's view: no build/, no egg-info, no .venv), links kept as links."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        source, target = REPO_ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return dest


def offline_env() -> dict[str, str]:
    """A user's shell with no virtualenv chosen; pip reads only the wheelhouse scripts/setup.sh dev fills."""
    drop = ("JAXT_VENV", "VENV", "VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(JAXT_CACHE=str(CACHE), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(CACHE / "wheelhouse"))
    return env
